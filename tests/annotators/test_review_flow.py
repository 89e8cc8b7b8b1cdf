"""Waiting rows and audit rows through the review queue, push, curation and assembly: one predicate
for "awaiting review", each row once, a promoted row's new state in the queue (no partition holds a
copy of another's row)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from ptfactory.annotators import curation
from ptfactory.annotators.curation import curate
from ptfactory.annotators.labelstudio.ledger import EVENT_SCHEMA, Event, Ledger
from ptfactory.annotators.labelstudio.settings import AnnotationConfig
from ptfactory.annotators.labelstudio.sync import Destination, push_queue
from ptfactory.annotators.recuration import recurate
from ptfactory.annotators.review_queue import ReviewQueue
from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.storage import assemble, schema
from ptfactory.storage.assemble import assemble_sft
from ptfactory.storage.schema import from_records, sample_id


def _judged(batch: str, spreads: list[float | None], means: list[float] | None = None) -> pa.Table:
    rows = []
    for i, spread in enumerate(spreads):
        messages = [
            {"role": "user", "content": f"{batch} question {i}"},
            {"role": "assistant", "content": f"{batch} answer {i}"},
        ]
        mean = means[i] if means else 5.0
        rows.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": batch,
                "kind": "sft",
                "messages": messages,
                "scores": {
                    "judge_mean": mean,
                    "judge_spread": spread,
                    "judge_votes": 2,  # two independent counted votes: enough to decide
                    "judges": [{"judge": "llm", "model": "m", "score": mean, "rationale": "looks fine"}],
                },
                "decisions": [{"stage": "judge", "verdict": "keep", "reason": "judged", "detail": None}],
            }
        )
    return from_records(rows)


CONFIG = RoutingConfig(review_budget=1, audit_rate=0.0)


def _two_batches(tmp_path: Path) -> tuple[ReviewQueue, pa.Table, pa.Table]:
    queue = ReviewQueue(tmp_path / "queue.sqlite")
    b1 = queue.admit("b1", _judged("b1", [6.0, 4.0]), CONFIG).table  # q0 routed, q1 waits
    b2 = queue.admit("b2", _judged("b2", [1.0]), CONFIG).table  # q1 of b1 takes b2's slot
    return queue, b1, b2


def _label(ledger: Ledger, ids: list[str]) -> None:
    """An expert accepts each of ``ids``, in the label log the way a pull writes it."""
    start = ledger.last_seq() + 1
    result = [
        {"from_name": "verdict", "to_name": "response", "type": "choices", "value": {"choices": ["accept"]}}
    ]
    events = [
        Event(
            "created", start + i, start + i, 1, "sft", sid, "a@x", result, False, None, f"t{start + i}", 1.0
        )
        for i, sid in enumerate(ids)
    ]
    ledger.commit_page(1, events, None)


def _accept(ids: list[str], corrected: dict[str, str] | None = None) -> pa.Table:
    events = []
    for seq, sid in enumerate(ids, start=1):
        result: list[dict[str, Any]] = [
            {
                "from_name": "verdict",
                "to_name": "response",
                "type": "choices",
                "value": {"choices": ["accept"]},
            }
        ]
        if corrected and sid in corrected:
            result.append({"from_name": "corrected", "type": "textarea", "value": {"text": [corrected[sid]]}})
        events.append(
            {
                "seq": seq,
                "event": "created",
                "annotation_id": seq,
                "task_id": seq,
                "project_id": 1,
                "queue": "sft",
                "sample_id": sid,
                "annotator": "a@x",
                "result": json.dumps(result),
                "was_cancelled": False,
                "created_at": None,
                "updated_at": str(seq),
                "lead_time_s": 1.0,
                "pulled_at": 0.0,
            }
        )
    return pa.Table.from_pylist(events, schema=EVENT_SCHEMA)


def test_one_predicate_everywhere() -> None:
    assert curation.awaiting_review is schema.awaiting_review
    assert assemble.pending_review is schema.pending_review
    for module in (curation, assemble):
        assert not any(hasattr(module, name) for name in ("_awaiting", "_awaits_review"))
    routed = [{"stage": "route", "verdict": "route", "reason": "needs_review", "detail": None}]
    waiting = [{"stage": "route", "verdict": "wait", "reason": "waiting", "detail": None}]
    decided = [*routed, {"stage": "review", "verdict": "accept", "reason": "human_accept", "detail": None}]
    assert [schema.awaiting_review(t) for t in (routed, waiting, decided, [], None)] == [
        True,
        False,
        False,
        False,
        False,
    ]
    assert [schema.is_waiting(t) for t in (routed, waiting, decided)] == [False, True, False]
    assert [schema.pending_review(t) for t in (routed, waiting, decided)] == [True, True, False]


def _recurate(
    queue: ReviewQueue, ledger: Ledger, routed: dict[str, pa.Table], previous: pa.Table | None = None
):  # type: ignore[no-untyped-def]
    return recurate(previous, queue, ledger, routed.get, lambda: list(routed))


def test_a_promoted_row_is_pushed_curated_and_published_once(tmp_path: Path) -> None:
    queue, b1, b2 = _two_batches(tmp_path)
    ledger = Ledger(tmp_path / "ledger.sqlite")
    q0, q1 = b1.column("sample_id").to_pylist()
    (own,) = b2.column("sample_id").to_pylist()
    # push: the queue's rows holding a slot, each once: b1's q0 (its own budget) and q1 (b2's)
    client = FakeClient()
    pushed = push_queue(queue, ledger, _to(client))
    assert dict(pushed.created) == {"sft": 2} and pushed.promoted == 1
    assert sorted(t["data"]["sample_id"] for t in client.tasks[1]) == sorted([q0, q1])  # b2's own row waits
    routed = {"b1": b1, "b2": b2}

    untouched = _recurate(queue, ledger, routed)
    assert untouched.full and untouched.curated.counts == {"awaiting": 2, "waiting": 1}
    assert untouched.curated.table.num_rows == 3  # b1's two rows (q1 once) and b2's one

    _label(ledger, [q0, q1])
    curated = _recurate(queue, ledger, routed, untouched.curated.table)
    assert not curated.full and curated.batches_read == [] and curated.rows_curated == 2
    by_id: dict[str, list[dict[str, Any]]] = {}
    for row in curated.curated.table.to_pylist():
        by_id.setdefault(row["sample_id"], []).append(row)
    assert {sid: len(rows) for sid, rows in by_id.items()} == {q0: 1, q1: 1, own: 1}
    reasons = [d["reason"] for d in by_id[q1][0]["decisions"] if d["stage"] == "route"]
    assert reasons == ["waiting", "needs_review"]
    assert by_id[q1][0]["decisions"][-1]["reason"] == "human_accept"
    assert curated.curated.counts == {"accepted": 2, "waiting": 1}
    assert queue.counts() == {"decided": 2, "waiting": 1}  # review drained the two it decided

    published = assemble_sft(curated.curated.table)
    assert sorted(published.table.column("sample_id").to_pylist()) == sorted([q0, q1])
    assert published.skipped == {"awaiting_review": 1}  # b2's own row, still waiting


def test_an_unchanged_prefilled_correction_is_an_accept(tmp_path: Path) -> None:
    _, b1, _ = _two_batches(tmp_path)
    q0 = b1.column("sample_id").to_pylist()[0]
    original = b1.to_pylist()[0]["messages"][-1]["content"]
    curated = curate(b1, _accept([q0], corrected={q0: f"  {original}\n"}), pairs=False)
    row = next(r for r in curated.table.to_pylist() if r["sample_id"] == q0)
    assert row["decisions"][-1]["reason"] == "human_accept"
    assert curated.table.num_rows == 2  # no (corrected, original) pair from an unchanged box
    edited = curate(b1, _accept([q0], corrected={q0: original + " Fixed."}), pairs=False)
    assert (
        next(r for r in edited.table.to_pylist() if r["sample_id"] == q0)["decisions"][-1]["verdict"]
        == "edit"
    )


def test_audit_labels_apply_and_score_the_auto_verdicts() -> None:
    table = _judged("b1", [0.0, 0.0, 0.0], means=[9.0, 1.0, 9.0])
    routed, counts = route(table, RoutingConfig(audit_rate=1.0, audit_budget=2))
    assert counts == {"audit": 2, "auto_accept": 1}
    audited = [r for r in routed.to_pylist() if r["decisions"][-1]["reason"] == "audit"]
    ids = [r["sample_id"] for r in audited]
    assert {schema.audited_verdict(r["decisions"]) for r in audited} == {"auto_accept", "auto_reject"}
    curated = curate(routed, _accept(ids))
    assert curated.audit_pairs == 2 and curated.audit_agreement == 0.5  # the expert kept the rejected one
    published = assemble_sft(curated.table)
    assert set(ids) <= set(published.table.column("sample_id").to_pylist())


class FakeClient:
    """The four calls push makes, in memory."""

    url = "http://label-studio.invalid"

    def __init__(self) -> None:
        self.projects: dict[str, int] = {}
        self.tasks: dict[int, list[dict[str, Any]]] = {}

    def project(self, prefix: str, queue: str) -> int:
        return self.projects.setdefault(queue, len(self.projects) + 1)

    def task_count(self, project_id: int) -> int:
        return len(self.tasks.get(project_id, []))

    def sample_ids(self, project_id: int) -> dict[str, int]:
        return {t["data"]["sample_id"]: i for i, t in enumerate(self.tasks.get(project_id, []))}

    def import_tasks(self, project_id: int, tasks: list[dict[str, Any]]) -> list[int]:
        self.tasks.setdefault(project_id, []).extend(tasks)
        return list(range(len(tasks)))


def _to(client: FakeClient) -> Any:
    where = Destination(client, AnnotationConfig(project_prefix="p"), 7.0)  # type: ignore[arg-type]
    return lambda batch: where


def test_push_sends_promoted_rows_once_and_audits_blind(tmp_path: Path) -> None:
    client, ledger = FakeClient(), Ledger(tmp_path / "ledger.sqlite")
    queue = ReviewQueue(tmp_path / "queue.sqlite")
    queue.admit("b1", _judged("b1", [6.0, 4.0]), CONFIG)  # q0 routed, q1 waits
    first = push_queue(queue, ledger, _to(client))
    assert dict(first.created) == {"sft": 1}
    queue.admit("b2", _judged("b2", [1.0]), CONFIG)  # q1 of b1 takes b2's slot
    queue.admit("b3", _judged("b3", [0.0], means=[9.0]), RoutingConfig(audit_rate=1.0, review_budget=0))
    second = push_queue(queue, ledger, _to(client), slots=["b2", "b3"])
    assert dict(second.created) == {"sft": 1, "sft-audit": 1} and second.promoted == 1
    assert [t["data"]["batch"] for t in client.tasks[client.projects["sft"]]] == ["b1", "b1"]
    (blind,) = client.tasks[client.projects["sft-audit"]]
    assert blind["data"]["audit"] is True and blind["predictions"] == []
    assert not {"judges", "judge_mean", "execution"} & set(blind["data"])
    again = push_queue(queue, ledger, _to(client))
    assert again.total_created == 0 and sum(again.existing.values()) == 3
