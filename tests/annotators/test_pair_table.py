"""Preference candidates built as a table (annotators/judges/pair_table.py) are the rows the row
by row builder makes, value for value: plain chats, multi-turn and system turns, agent episodes
with tool calls, answers without an assistant turn, rows without provenance, unicode and quotes
in the texts, weights and left-out judges, and no LLM judge at all."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa
import pytest

from ptfactory.annotators.judges.llm import LLMJudge
from ptfactory.annotators.judges.pair_table import preference_candidate_table
from ptfactory.annotators.judges.pairwise import preference_candidates
from ptfactory.annotators.judges.panel import pair_candidate_rows
from ptfactory.storage.schema import SAMPLE_SCHEMA, from_records, sample_id
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
def test_the_table_is_the_rows_preference_candidates_makes(seed: int, names: tuple[str, ...]) -> None:
    table = _judged(seed)
    judges = [LLMJudge(name, engine=Letters(model_id=name)) for name in names]
    # a zero weight: rows where it is the only counted vote are aggregated by ``aggregate`` itself
    weights = {"x": 2.0} if seed % 3 else {"x": 0.0}
    leave_out = frozenset({"y"} if seed % 2 else ())
    new = preference_candidate_table(table, judges, 1.0, weights, leave_out)
    old = preference_candidates(pair_candidate_rows(table, 1.0), judges, 1.0, weights, leave_out)
    assert old.rows, "the batch makes pairs"
    assert new.table is not None and new.table.schema == SAMPLE_SCHEMA
    assert new.count == len(old.rows)
    assert new.table.to_pylist() == from_records(old.rows).to_pylist()
    assert (new.consistency, new.agreement) == (old.consistency, old.agreement)


def test_a_batch_without_pairs_gives_an_empty_table() -> None:
    table = _judged(0).slice(0, 1)
    report = preference_candidate_table(table, [], 1.0)
    assert report.count == 0 and report.table is not None and report.table.schema == SAMPLE_SCHEMA
