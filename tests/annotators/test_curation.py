"""Pure logic of the Label Studio bridge: parsing results, combining annotators, replaying the log."""

from __future__ import annotations

import json

import pyarrow as pa

from ptfactory.annotators.curation import curate
from ptfactory.annotators.labelstudio.ledger import EVENT_SCHEMA
from ptfactory.annotators.labelstudio.results import Label, combine, parse_result
from ptfactory.annotators.labelstudio.tasks import to_task
from ptfactory.storage.schema import add_decision
from tests.conftest import make_rows


def _verdict(value: str) -> list[dict[str, object]]:
    return [{"from_name": "verdict", "to_name": "response", "type": "choices", "value": {"choices": [value]}}]


def test_parse_result_reads_our_controls_and_ignores_garbage() -> None:
    result = [
        *_verdict("accept"),
        {"from_name": "rating", "type": "rating", "value": {"rating": 4}},
        {"from_name": "corrected", "type": "textarea", "value": {"text": ["  better  "]}},
        {"from_name": "unknown", "value": {"choices": ["x"]}},
        "not a dict",
    ]
    assert parse_result(result) == Label("accept", rating=4, corrected="better")
    assert parse_result("{not json") == Label(None)
    assert parse_result(_verdict("accept"), was_cancelled=True).verdict == "skipped"
    pref = [{"from_name": "preference", "value": {"choices": ["tie"]}}]
    assert parse_result(pref) == Label("reject", preference="tie")


def test_combine_majority_and_ties() -> None:
    assert combine([Label("accept"), Label("accept"), Label("reject")]) == Label("accept")
    assert combine([Label("accept"), Label("reject")]) is None
    assert combine([Label("skipped")]) is None
    assert combine([Label("accept", corrected="x"), Label("accept", rating=5)]) == Label(
        "accept", rating=5, corrected="x"
    )
    assert combine([Label("accept", preference="B"), Label("accept", preference="A")]) is None


def _routed(count: int) -> pa.Table:
    table = make_rows(count)
    return add_decision(table, "route", ["route"] * count, ["needs_review"] * count)


def _events(rows: list[dict[str, object]]) -> pa.Table:
    full = []
    for seq, row in enumerate(rows, start=1):
        full.append(
            {
                "seq": seq,
                "task_id": 1,
                "project_id": 1,
                "queue": "sft",
                "was_cancelled": False,
                "created_at": None,
                "updated_at": str(seq),
                "lead_time_s": 2.0,
                "pulled_at": 0.0,
                "annotator": "a@x",
                **row,
            }
        )
    return pa.Table.from_pylist(full, schema=EVENT_SCHEMA)


def test_curate_replays_updates_and_deletions() -> None:
    table = _routed(3)
    ids = table.column("sample_id").to_pylist()
    events = _events(
        [
            {
                "event": "created",
                "annotation_id": 1,
                "sample_id": ids[0],
                "result": json.dumps(_verdict("reject")),
            },
            {
                "event": "updated",
                "annotation_id": 1,
                "sample_id": ids[0],
                "result": json.dumps(_verdict("accept")),
            },
            {
                "event": "created",
                "annotation_id": 2,
                "sample_id": ids[1],
                "result": json.dumps(_verdict("accept")),
            },
            {"event": "deleted", "annotation_id": 2, "sample_id": ids[1], "result": None},
            {
                "event": "created",
                "annotation_id": 3,
                "sample_id": ids[2],
                "result": json.dumps(_verdict("reject")),
            },
        ]
    )
    curated = curate(table, events)
    by_id = {r["sample_id"]: r for r in curated.table.to_pylist()}
    assert by_id[ids[0]]["decisions"][-1]["verdict"] == "accept"
    assert by_id[ids[1]]["decisions"][-1]["stage"] == "route"  # the deletion took the label back
    assert by_id[ids[2]]["decisions"][-1]["verdict"] == "reject"
    assert curated.counts == {"accepted": 1, "rejected": 1, "awaiting": 1}


def test_to_task_prefills_judge_votes_and_shows_them() -> None:
    row = make_rows(1).to_pylist()[0]
    row["scores"] = {
        "judges": [{"judge": "j", "model": "m", "score": 9.0, "rationale": "good"}],
        "judge_mean": 9.0,
    }
    task = to_task(row, accept_at=7)
    assert task["data"]["sample_id"] == row["sample_id"]
    assert "j (m): 9/10" in task["data"]["judges"]
    assert task["predictions"][0]["result"][0]["value"] == {"choices": ["accept"]}
    assert task["predictions"][0]["model_version"] == "j"


def _answer(prompt: str, answer: str, kind: str = "sft", **scores: object) -> dict[str, object]:
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    return {
        "sample_id": answer,
        "batch": "b1",
        "kind": kind,
        "messages": messages,
        "scores": scores,
        "provenance": {"method": "response"},
        "decisions": [{"stage": "generate", "verdict": "keep", "reason": "sampled", "detail": None}],
    }


def test_auto_pairs_come_from_execution_not_from_score_gaps() -> None:
    from ptfactory.annotators.pairs import auto_pairs

    failed = _answer("def f", "bad code", "code", execution={"status": "failed"})
    failed["decisions"].append(
        {"stage": "execute", "verdict": "drop", "reason": "tests_failed", "detail": None}
    )
    rows = [
        _answer("def f", "good code", "code", execution={"status": "passed"}),
        failed,
        # a score gap is a preference candidate, judged pairwise and routed (test_preference_candidates)
        _answer("q1", "great", judge_mean=9.0),
        _answer("q1", "poor", judge_mean=3.0),
    ]
    pairs = {p["decisions"][0]["reason"]: p for p in auto_pairs(rows)}
    assert set(pairs) == {"execution_pass_vs_fail"}
    code = pairs["execution_pass_vs_fail"]
    assert (code["chosen"][0]["content"], code["rejected"][0]["content"]) == ("good code", "bad code")
    assert code["messages"] == [{"role": "user", "content": "def f"}]
