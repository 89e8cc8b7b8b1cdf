"""The judge panel, routing and curation work on whole Arrow columns; they give exactly what the
row-by-row code they replaced gave (kept verbatim in tests/annotators/rowwise as the oracle), on
random batches: null and empty trails and scores, rows dropped upstream (dedup, difficulty),
rows of earlier batches waiting in the review queue, audit rows, agent rows with steps and step
labels, preference rows, code rows with executions and student attempts, and the labels an expert
gives them (accept, reject, corrections, A/B choices, first wrong steps, several annotators,
deletions)."""

from __future__ import annotations

import json
import math
import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from ptfactory.annotators.curation import curate
from ptfactory.annotators.judges.base import Judge, Vote
from ptfactory.annotators.judges.panel import (
    Panel,
    judged_rows,
    means_by_drop_reason,
    pair_candidate_indices,
    pair_candidates,
)
from ptfactory.annotators.judges.vote_columns import rounded
from ptfactory.annotators.labelstudio.ledger import EVENT_SCHEMA
from ptfactory.annotators.pairs import auto_pairs, pair_sources
from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.annotators.trajectory_review import prefix_pairs, prefix_sources
from ptfactory.engines.base import Completion, Conversation, Engine, Prompt, SamplingParams
from ptfactory.storage.schema import from_records
from tests.annotators.rowwise import curation as old_curation
from tests.annotators.rowwise import panel as old_panel
from tests.annotators.rowwise import routing as old_routing

SEEDS = range(8)

_TRAILS: list[list[tuple[str, str, str, str | None]] | None] = [
    None,
    [],
    [("seed", "keep", "with_reference", None)],
    [("dedup", "drop", "near_duplicate", "of s1")],
    [("seed", "keep", "x", None), ("difficulty", "drop", "too_easy", None)],
    [("difficulty", "drop", "too_hard", None)],
    [("difficulty", "drop", "too_easy", None), ("dedup", "drop", "exact_duplicate", None)],
    [("generate", "keep", "truncated", None)],
    [("execution", "drop", "failed", None)],
    [("judge", "keep", "scored", "3 counted")],
]


def _trail(rng: random.Random) -> list[dict[str, Any]] | None:
    chosen = rng.choice(_TRAILS)
    if chosen is None:
        return None
    return [{"stage": s, "verdict": v, "reason": r, "detail": d} for s, v, r, d in chosen]


def _score(rng: random.Random, *values: Any) -> Any:
    return rng.choice([None, round(rng.uniform(1, 10), rng.choice([0, 1, 2, 4])), *values])


def _scores(rng: random.Random, kind: str) -> dict[str, Any] | None:
    if rng.random() < 0.1:
        return None
    scores: dict[str, Any] = {
        "judge_mean": _score(rng, 7.0, 3.0, 5.0),
        # few distinct values: rows tie on uncertainty, and the budget cuts through ties
        "judge_spread": rng.choice([None, 0.0, 3.0, 1.0, 1.0, rng.uniform(0, 6)]),
        "judge_confidence": rng.choice([None, None, 0.5, rng.random(), -0.2, 1.3]),
    }
    if kind == "code":
        scores["execution"] = {"status": rng.choice(["passed", "failed", "timeout", "error", None])}
        if rng.random() < 0.5:
            attempts = {
                k: {"text": f"{k} {rng.random():.3f}", "status": "passed" if k == "passing" else "failed"}
                for k in rng.sample(["passing", "failing"], rng.randint(0, 2))
            }
            detail = rng.choice([json.dumps(attempts), "not json", None])
            scores["difficulty"] = {
                "method": rng.choice(["pass_rate", "ifd"]),
                "value": 0.5,
                "detail": detail,
            }
    return scores


def _verdict(rng: random.Random) -> dict[str, Any]:
    """A verifier's verdict as ``scores.verifiers`` holds it."""
    verdict = rng.choice(["pass", "fail", "partial", "no_answer", "abstain"])
    return {
        "verifier": rng.choice(["answer", "code"]),
        "kind": "answer",
        "verdict": verdict,
        "reason": f"{verdict}_why",
        "score": {"pass": 1.0, "abstain": None}.get(verdict, 0.0),
        "partial": None,
        "final": verdict == "fail",
        "evidence": "{}",
    }


def _checked(rng: random.Random, record: dict[str, Any]) -> None:
    record["provenance"]["model"] = rng.choice([None, "", "SmolLM2-135M-Instruct"])
    if record["scores"] is not None:
        record["scores"]["judge_votes"] = rng.choice([None, 0, 1, 2, 2, 3])
        record["scores"]["verifiers"] = rng.choice(
            [None, None, [], [_verdict(rng)], [_verdict(rng), _verdict(rng)]]
        )


def _agent(rng: random.Random, record: dict[str, Any]) -> None:
    steps, messages = [], [{"role": "user", "content": "Make the tests pass."}]
    for i in range(rng.randint(0, 3)):
        name, arg = rng.choice(["ls", "cat", "sed"]), rng.choice(["a", "b"])
        arguments = json.dumps({"path": arg})
        call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": "out"})
        steps.append({"index": i, "kind": "tool", "name": name, "arguments": arguments, "status": "ok"})
    messages.append({"role": "assistant", "content": "done"})
    record.update(
        messages=messages,
        steps=steps or rng.choice([None, []]),
        outcome={"task_id": rng.choice(["t1", "t2", "", None]), "solved": rng.choice([True, False, None])},
    )
    if rng.random() < 0.2:
        record["step_labels"] = [{"step": 0, "label": rng.choice(["ok", "first_error"]), "annotator": "x"}]


MIX = ["sft", "sft", "code", "preference", "agent"]


def _batch(
    rng: random.Random, n: int, batch: str, pool: int, kinds: list[str] = MIX, *, groups: int = 0
) -> pa.Table:
    """Random rows; sample ids from a small pool, so ids repeat within and across batches; answers
    to about ``groups`` instructions (default: a row in four shares one)."""
    records = []
    groups = groups or n // 4 + 1
    for i in range(n):
        kind = rng.choice(kinds)
        question = f"question {rng.randint(0, groups)}"
        answer = rng.choice([f"answer {i}", "   ", f"other {i % 3}"])
        messages = [{"role": "user", "content": question}]
        if rng.random() < 0.9:
            messages.append({"role": "assistant", "content": answer})
        record: dict[str, Any] = {
            "sample_id": f"s{rng.randint(0, pool)}",
            "batch": batch,
            "kind": kind,
            "messages": messages,
            "provenance": {
                "method": "test",
                "parent_id": rng.choice([None, "", f"p{rng.randint(0, groups)}"]),
            },
            "scores": _scores(rng, kind),
            "decisions": _trail(rng),
        }
        if kind == "preference":
            record["messages"] = messages[:1]
            record["chosen"] = [{"role": "assistant", "content": f"good {i}"}]
            record["rejected"] = [{"role": "assistant", "content": f"bad {i}"}]
        if kind == "agent":
            _agent(rng, record)
        # the verifiers' verdicts, the independent votes and who wrote it, drawn apart (the other
        # draws, and so the rows other stages' tests see, stay as they were)
        _checked(random.Random(hash((rng.getstate()[1][:8], i))), record)
        records.append(record)
    table = from_records(records)
    cut = n // 3  # several chunks, as stages' concatenations make them
    return pa.concat_tables([table.slice(0, cut), table.slice(cut)])


def _config(rng: random.Random) -> RoutingConfig:
    return RoutingConfig(
        review_budget=rng.choice([0, 1, 3, 10]),
        silent=rng.choice(["review", "accept", "reject"]),
        max_wait_batches=rng.choice([1, 2, 3]),
        audit_rate=rng.choice([0.0, 0.3, 1.0]),
        audit_budget=rng.choice([0, 2, 5]),
        audit_min=rng.choice([0, 2]),
        min_votes=rng.choice([2, 3]),
    )


def _newest(tables: list[pa.Table]) -> pa.Table:
    """Each (sample_id, batch) once, its last state: what the review queue holds of a row a later
    batch's routing decided (no partition keeps a copy of another's row)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for table in tables:
        for row in table.to_pylist():
            rows.pop((row["sample_id"], row["batch"]), None)
            rows[(row["sample_id"], row["batch"])] = row
    return from_records(list(rows.values())) if rows else tables[0].slice(0, 0)


def _history(rng: random.Random, pool: int, kinds: list[str] = MIX) -> tuple[pa.Table, list[str]]:
    """Earlier batches' rows as routing and the queue left them (routed by the oracle), some of them
    promoted by a later batch's budget."""
    tables: list[pa.Table] = []
    order = ["b0", "b1", "b2"]
    for position, name in enumerate(order):
        routed, _ = old_routing.route(
            _batch(rng, rng.randint(0, 25), name, pool, kinds),
            _config(rng),
            waiting=_newest(tables) if tables else None,
            order=order[:position],
        )
        tables.append(routed)
    return _newest(tables), order


def _same(new: pa.Table, old: pa.Table) -> None:
    assert new.schema == old.schema
    assert new.to_pylist() == old.to_pylist()


@pytest.mark.parametrize("seed", SEEDS)
def test_routing_matches_the_row_by_row_version(seed: int) -> None:
    rng = random.Random(seed)
    pool = rng.choice([15, 60])
    earlier, order = _history(rng, pool)
    for _ in range(3):
        table = _batch(rng, rng.choice([0, 1, 5, 40]), "b3", pool)
        config = _config(rng)
        kwargs: dict[str, Any] = rng.choice(
            [{}, {"batch": "b3"}, {"batch": "b3", "waiting": earlier, "order": order[: rng.randint(0, 3)]}]
        )
        new, counts = route(table, config, **kwargs)
        old, old_counts = old_routing.route(table, config, **kwargs)
        _same(new, old)
        assert list(counts.items()) == list(old_counts.items())


def _events(rng: random.Random, routed: pa.Table) -> pa.Table:
    """Label Studio events for some of the rows: labels of every kind, several annotators, edits
    and deletions, and a few for ids that are not in the batch."""
    ids = [r for r in routed.column("sample_id").to_pylist() if rng.random() < 0.6] + ["nowhere"]
    events, seq = [], 0
    for sid in ids:
        for annotator in rng.sample(["ann@x", "bob@x", None], rng.randint(1, 3)):
            seq += 1
            result: list[dict[str, Any]] = []
            choice = rng.random()
            if choice < 0.45:
                result.append(
                    {"from_name": "verdict", "value": {"choices": [rng.choice(["accept", "reject"])]}}
                )
            elif choice < 0.65:
                result.append({"from_name": "verdict", "value": {"choices": ["accept"]}})
                text = rng.choice(["a better answer", "   ", "answer 3"])
                result.append({"from_name": "corrected", "value": {"text": [text]}})
            else:
                result.append({"from_name": "preference", "value": {"choices": [rng.choice("ABBt")[:1]]}})
                if result[-1]["value"]["choices"] == ["t"]:
                    result[-1]["value"]["choices"] = ["tie"]
            if rng.random() < 0.4:
                result.append(
                    {"from_name": "first_error", "value": {"choices": [rng.choice(["0", "1", "none"])]}}
                )
            if rng.random() < 0.3:
                result.append({"from_name": "rating", "value": {"rating": rng.randint(1, 5)}})
            event = rng.choice(["created", "created", "updated", "deleted"])
            events.append(
                {
                    "seq": seq,
                    "event": event,
                    "annotation_id": rng.randint(0, seq),
                    "task_id": seq,
                    "project_id": 1,
                    "queue": "sft",
                    "sample_id": sid,
                    "annotator": annotator,
                    "result": json.dumps(result),
                    "was_cancelled": rng.random() < 0.05,
                    "created_at": "2026-12-01T00:00:00Z",
                    "updated_at": "2026-12-01T00:00:00Z",
                    "lead_time_s": rng.choice([None, 3.0]),
                    "pulled_at": 0.0,
                }
            )
    return pa.Table.from_pylist(events, schema=EVENT_SCHEMA)


def _curated_fields(curated: Any) -> dict[str, Any]:
    fields = dict(vars(curated))
    fields["table"] = fields["table"].to_pylist()
    fields["counts"] = list(curated.counts.items())
    fields["per_annotator"] = list(curated.per_annotator.items())
    return fields


@pytest.mark.parametrize("seed", SEEDS)
def test_curation_matches_the_row_by_row_version(seed: int) -> None:
    rng = random.Random(seed)
    pool = rng.choice([15, 60])
    # every kind; mostly code rows (pass-over-fail pairs); mostly agent rows (prefix pairs)
    kinds = [MIX, ["code", "code", "code", "sft"], ["agent", "agent", "agent", "sft"]][seed % 3]
    earlier, order = _history(rng, pool, kinds)
    routed, _ = old_routing.route(
        _batch(rng, 40, "b3", pool, kinds), _config(rng), batch="b3", waiting=earlier, order=order
    )
    history = _newest([earlier, routed])
    for events in (_events(rng, history), _events(rng, history)):
        for pairs in (True, False):
            new = curate(history, events, pairs=pairs)
            old = old_curation.curate(history, events, pairs=pairs)
            assert new.table.schema == old.table.schema
            assert _curated_fields(new) == _curated_fields(old)


@dataclass
class Random(Judge):
    """Votes of every kind, the same ones on every call for the same rows: counted scores (int and
    float), unparsed, abstaining, with and without confidence, some under another judge name."""

    seed: int = 0
    lost: float = 0.1

    @property
    def model(self) -> str:
        return f"m-{self.name}"

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        rng = random.Random(f"{self.seed}-{self.name}")
        votes = []
        for _ in rows:
            name = self.name if rng.random() < 0.95 else "alias"
            draw = rng.random()
            if draw < self.lost:
                votes.append(
                    Vote(name, self.model, None, "unparsed", "lost", "??", parsed=False, method="unparsed")
                )
            elif draw < self.lost + 0.1:
                votes.append(Vote(name, self.model, None, "abstain", "not mine"))
            else:
                score = rng.choice([rng.randint(1, 10), round(rng.uniform(1, 10), 3), rng.uniform(1, 10)])
                confidence = rng.choice([None, rng.random(), 1.0])
                verdict = "accept" if score >= 6 else "reject"
                votes.append(
                    Vote(name, self.model, score, verdict, "why", method="probability", confidence=confidence)
                )
        return votes


@pytest.mark.parametrize("seed", SEEDS)
def test_the_panel_follows_the_rules_as_the_issue_states_them(seed: int) -> None:
    """Every judged row's aggregate is what the reference (tests/annotators/rowwise/panel.py, from
    the issue's text) makes of its recorded votes, with the weights, left-out and constant judges
    the batch report states; rows not judged keep their scores."""
    rng = random.Random(seed)
    table = _batch(rng, rng.choice([0, 3, 60]), "b1", 200)
    judges: list[Judge] = [
        Random(name, seed=seed, lost=rng.choice([0.0, 0.1, 0.5]), family=rng.choice(["f1", "f2"]))
        for name in "abcde"[: rng.randint(1, 5)]
    ]
    panel = Panel(judges, min_counted_share=rng.choice([0.5, 0.95]))
    new, report = panel.judge_table(table)
    judged = set(judged_rows(table))
    weight = {n: w.weight for n, w in report.weights.items()}
    in_batch = {n for n, w in report.weights.items() if not (w.constant or w.left_out)}
    unmeasured = {n for n, w in report.weights.items() if w.unmeasured}
    key = {j.name: f"{j.family}/{j.method}" for j in judges}
    for i, (before, after) in enumerate(zip(table.to_pylist(), new.to_pylist(), strict=True)):
        if i not in judged:  # (a row without scores may come back with all of them null)
            assert after["scores"] == before["scores"] or not any((after["scores"] or {}).values())
            continue
        members = [j.name for j in judges]
        expected = old_panel.aggregate_row(
            after["scores"]["judges"], members, weight, in_batch, unmeasured, key
        )
        assert {k: after["scores"][k] for k in expected} == expected
    assert means_by_drop_reason(new) == old_panel.means_by_drop_reason(new)


@pytest.mark.parametrize("seed", SEEDS)
def test_pair_sources_give_the_pairs_every_row_gives(seed: int) -> None:
    rng = random.Random(seed)
    code = _batch(rng, 300, "b1", 10_000, ["code", "code", "code", "sft"], groups=5)
    agents = _batch(rng, 150, "b1", 10_000, ["agent", "agent", "sft"])
    labels = [
        [{"step": rng.randint(0, 2), "label": rng.choice(["ok", "first_error"]), "annotator": "x"}]
        if rng.random() < 0.5
        else None
        for _ in range(agents.num_rows)
    ]
    index = agents.schema.get_field_index("step_labels")
    agents = agents.set_column(
        index, agents.schema.field(index), pa.array(labels, agents.schema.field(index).type)
    )
    for table in (code, agents, pa.concat_tables([agents, code])):
        everything = table.to_pylist()
        made = auto_pairs(table.filter(pa.array(pair_sources(table))).to_pylist())
        assert made == auto_pairs(everything)
        prefixes = prefix_pairs(table.filter(pa.array(prefix_sources(table))).to_pylist())
        assert prefixes == prefix_pairs(everything)
    # several groups make pairs (so their order is checked), and the masks leave rows out
    assert len(auto_pairs(code.to_pylist())) >= 3 and len(prefix_pairs(agents.to_pylist())) >= 1
    assert 0 < pair_sources(code).sum() < code.num_rows and 0 < prefix_sources(agents).sum() < agents.num_rows


@pytest.mark.parametrize("seed", SEEDS)
def test_pair_candidates_follow_the_rules_as_the_issue_states_them(seed: int) -> None:
    """Best over worst per instruction, never a verifier-failed row chosen, never a generator's
    sample over a verified or human-written row (the reference in tests/annotators/rowwise/panel.py)."""
    rng = random.Random(seed)
    table = _batch(rng, 300, "b1", 10_000, ["sft", "sft", "sft", "code"], groups=15)
    for margin in (0.1, 2.0, 5.0):
        expected = old_panel.pairs(table, margin)
        assert pair_candidate_indices(table, margin) == expected
        rows = pair_candidates(table, margin).to_pylist()
        ids = table.column("sample_id").to_pylist()
        assert [r["sample_id"] for r in rows] == [ids[i] for pair in expected for i in pair]
    assert len(old_panel.pairs(table, 0.1)) >= 1


def test_rounding_is_pythons_round_not_numpys() -> None:
    """np.round scales, rounds and divides, and differs from round() on values a hair off a half."""
    rng = random.Random(0)
    halves = [k / 20_000 for k in range(1, 400_000, 2)]  # x.xxxx5, as the nearest doubles
    values = halves + [rng.uniform(-10, 10) for _ in range(20_000)]
    values += [2.675, -1.00005, -0.0, 0.0, 1e30, -1e30, 12345678.00005, float("inf"), float("nan")]
    array, present = np.array(values), np.ones(len(values), dtype=bool)
    present[::11] = False
    got = rounded(array, present).to_pylist()
    expected = [round(v, 4) if p else None for v, p in zip(values, present.tolist(), strict=True)]
    same = [
        g == e or (g is not None and e is not None and math.isnan(g) and math.isnan(e))
        for g, e in zip(got, expected, strict=True)
    ]
    assert all(same)
    assert [math.copysign(1, v) for v in got[-7:-5]] == [-1.0, 1.0]  # -0.0 stays -0.0
    assert any(float(np.round(v, 4)) != round(v, 4) for v in values[:-2])  # numpy alone would differ


@dataclass
class Letters(Engine):
    """P(A) from a hash of the prompt: comparisons that agree with the scores, or not, or flip."""

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        raise NotImplementedError

    def _choice_logprobs(self, prompts: Sequence[Prompt], choices: Sequence[str]) -> list[list[float]]:
        out = []
        for prompt in prompts:
            text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
            p = 0.05 + 0.9 * (zlib.crc32(text.encode()) % 1000) / 1000
            out.append([math.log(p), math.log(1 - p)])
        return out
