"""Preference candidates built as a table (annotators/judges/pair_table.py): the pairs the rules
choose (tests/annotators/rowwise/panel.py, from the issue's text), the chosen and rejected turns cut
right from plain chats, multi-turn and system turns, agent episodes with tool calls, answers without
an assistant turn, rows without provenance, unicode and quotes in the texts; the comparisons'
aggregate with weights and left-out judges; and no LLM judge at all."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa
import pytest

from ptfactory.annotators.judges.llm import LLMJudge
from ptfactory.annotators.judges.pair_table import preference_candidate_table
from ptfactory.annotators.judges.pairwise import preference_candidates
from ptfactory.storage.schema import SAMPLE_SCHEMA, from_records, response_of, sample_id
from tests.annotators.rowwise import panel as rules
from tests.annotators.test_vectorized_stages import Letters


def _conversation(rng: random.Random, question: str, i: int) -> list[dict[str, Any]]:
    shape = rng.choice(["plain", "plain", "system", "turns", "episode", "no answer", "tool id"])
    answer = rng.choice([f"answer {i}", 'a "quoted"\nanswer\\ é ✓', f"other {i % 3}", ""])
    if shape == "system":
        return [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
        ]
    if shape == "turns":
        return [
            {"role": "user", "content": question},
            {"role": "assistant", "content": "first"},
            {"role": "user", "content": "and then?"},
            {"role": "assistant", "content": answer},
        ]
    if shape == "episode":
        call = {"id": "c0", "type": "function", "function": {"name": "ls", "arguments": json.dumps({"p": i})}}
        return [
            {"role": "user", "content": question},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "name": "ls", "content": "out"},
            {"role": "assistant", "content": answer},
        ]
    if shape == "tool id":  # a turn that answers a call without being a tool turn
        return [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer, "tool_call_id": "c9", "name": "x"},
        ]
    if shape == "no answer":
        return [{"role": "user", "content": question}]
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def _judged(seed: int, n: int = 240) -> pa.Table:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        parent = f"p{rng.randint(0, n // 4)}"
        messages = _conversation(rng, f"question {parent} ✓", i)
        provenance = rng.choice([None, {"method": "response", "parent_id": parent, "model": "m"}])
        if provenance is None and rng.random() < 0.5:
            provenance = {"parent_id": parent}
        mean = rng.choice([None, round(rng.uniform(1, 10), rng.choice([0, 2, 4]))])
        records.append(
            {
                "sample_id": sample_id("sft", messages) + str(i),
                "batch": "b1",
                "kind": rng.choice(["sft", "sft", "sft", "code"]),
                "messages": messages,
                "provenance": provenance,
                "scores": {"judge_mean": mean, "judge_spread": 1.0},
                "decisions": [{"stage": "judge", "verdict": "keep", "reason": "scored", "detail": None}],
                "language": rng.choice([None, "python"]),
                "tools": rng.choice([None, '[{"name": "ls"}]']),
            }
        )
    table = from_records(records)
    return pa.concat_tables([table.slice(0, n // 3), table.slice(n // 3)])  # several chunks


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("names", [("x", "y"), ("x",), ()])
def test_the_table_holds_the_pairs_the_rules_choose(seed: int, names: tuple[str, ...]) -> None:
    table = _judged(seed)
    judges = [LLMJudge(name, engine=Letters(model_id=name), family=name) for name in names]
    weights = {"x": 2.0} if seed % 3 else {"x": 0.0}  # y unmeasured; x measured, or measured at 0
    leave_out = frozenset({"y"} if seed % 2 else ())
    new = preference_candidate_table(table, judges, 1.0, weights, leave_out)
    rows = table.to_pylist()
    expected = rules.pairs(table, 1.0)
    assert expected, "the batch makes pairs"
    assert new.table is not None and new.table.schema == SAMPLE_SCHEMA
    made = new.table.to_pylist()
    assert len(made) == len(expected)
    for pair, (best, worst) in zip(made, expected, strict=True):
        chosen, rejected = rows[best]["messages"], rows[worst]["messages"]
        assert pair["kind"] == "preference" and pair["messages"] == chosen[:-1]
        assert response_of(pair["chosen"], final_turn=False) == response_of(chosen[-1:], final_turn=False)
        assert response_of(pair["rejected"], final_turn=False) == response_of(rejected[-1:], final_turn=False)
        assert json.loads(pair["decisions"][0]["detail"])["chosen"] == rows[best]["sample_id"]
        assert pair["provenance"]["parent_id"] == rows[best]["sample_id"]
        members = [v["judge"] for v in pair["scores"]["judges"]]
        key = {n: f"{n}/pairwise" for n in names}
        in_batch = {n for n in names if n not in leave_out}
        expected_scores = rules.aggregate_row(pair["scores"]["judges"], members, {"x": weights["x"], "y": 0.0},
                                              in_batch, {"y"}, key)  # fmt: skip
        assert {k: pair["scores"][k] for k in expected_scores} == expected_scores
    # the dict-row entry point is the same table
    again = preference_candidates(rows, judges, 1.0, weights, leave_out)
    assert again.rows == made


def test_a_batch_without_pairs_gives_an_empty_table() -> None:
    table = _judged(0).slice(0, 1)
    report = preference_candidate_table(table, [], 1.0)
    assert report.count == 0 and report.table is not None and report.table.schema == SAMPLE_SCHEMA
