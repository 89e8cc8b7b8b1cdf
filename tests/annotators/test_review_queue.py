"""The review queue's budget claims are atomic: two batches routing at once against one queue store
(two threads, two connections, the real SQLite file) never spend two review budgets on one row;
the second ranks what the first left. Interleaved deterministically by the queue's hook."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa

from ptfactory.annotators.review_queue import ALREADY_QUEUED, Admission, ReviewQueue
from ptfactory.annotators.routing import RoutingConfig
from tests.annotators.test_review_flow import _judged

WAIT = RoutingConfig(review_budget=0, audit_rate=0.0, max_wait_batches=10)
TWO = RoutingConfig(review_budget=2, audit_rate=0.0, max_wait_batches=10)


def _calm(batch: str) -> pa.Table:
    """One row of its own the judges agree on (auto-accepted): the budget goes to waiting rows."""
    return _judged(batch, [0.0], means=[9.0])


def test_two_batches_routing_at_once_never_claim_one_row_twice(tmp_path: Path) -> None:
    path = tmp_path / "queue.sqlite"
    # four rows of b0 wait for a slot, most uncertain first: spreads 6, 5, 4, 3
    ReviewQueue(path).admit("b0", _judged("b0", [3.0, 6.0, 4.0, 5.0]), WAIT)
    spread = {
        r["sample_id"]: r["scores"]["judge_spread"] for r in _judged("b0", [3.0, 6.0, 4.0, 5.0]).to_pylist()
    }

    a_read, a_go, b_begins, b_read = (
        threading.Event(),
        threading.Event(),
        threading.Event(),
        threading.Event(),
    )
    seen: list[str] = []

    def hold_a(_: str) -> None:  # b1 has read the waiting rows and holds the write lock
        seen.append("b1 read")
        a_read.set()
        assert a_go.wait(60)

    def note_b(_: str) -> None:
        seen.append("b2 read")
        b_read.set()

    results: dict[str, Admission] = {}
    failures: list[BaseException] = []

    def admit(queue: ReviewQueue, batch: str) -> None:
        try:
            if batch == "b2":
                b_begins.set()
            results[batch] = queue.admit(batch, _calm(batch), TWO)
        except BaseException as exc:  # re-raised in the test's thread below
            failures.append(exc)

    first = threading.Thread(target=admit, args=(ReviewQueue(path, hook=hold_a), "b1"))
    second = threading.Thread(target=admit, args=(ReviewQueue(path, hook=note_b), "b2"))
    first.start()
    assert a_read.wait(60)
    second.start()
    assert b_begins.wait(60)
    # while b1 holds the lock between its read and its claims, b2 cannot read the waiting rows
    assert not b_read.wait(1.0), "b2 read the queue while b1 was claiming: claims are not atomic"
    a_go.set()
    first.join(60)
    second.join(60)
    assert not failures, failures
    assert seen == ["b1 read", "b2 read"]

    # each budget spent on different rows: b1 the two most uncertain, b2 the next two
    queue = ReviewQueue(path)
    slots = {p.sample_id: p.slot for p in queue.pending()}
    assert sorted(slots.values()) == ["b1", "b1", "b2", "b2"]
    by_budget = {b: sorted(spread[s] for s, slot in slots.items() if slot == b) for b in ("b1", "b2")}
    assert by_budget == {"b1": [5.0, 6.0], "b2": [3.0, 4.0]}
    assert results["b1"].promoted == results["b2"].promoted == 2
    assert queue.counts() == {"review": 4}


def test_a_sample_queued_from_another_batch_is_decided_through_that_copy(tmp_path: Path) -> None:
    queue = ReviewQueue(tmp_path / "queue.sqlite")
    rows = _judged("b1", [6.0])
    queue.admit("b1", rows, TWO)  # routed to review
    again = rows.set_column(rows.schema.get_field_index("batch"), "batch", pa.array(["b2"], pa.string()))
    admission = queue.admit("b2", again, TWO)
    (row,) = admission.table.to_pylist()
    last = row["decisions"][-1]
    assert (last["verdict"], last["reason"]) == ("drop", ALREADY_QUEUED)
    assert "batch b1" in last["detail"]
    assert admission.counts == {ALREADY_QUEUED: 1}  # no budget of b2 spent on it
    assert [p.batch for p in queue.pending()] == ["b1"]


def test_a_rerun_keeps_what_the_first_admission_decided(tmp_path: Path) -> None:
    queue = ReviewQueue(tmp_path / "queue.sqlite")
    first = queue.admit("b1", _judged("b1", [6.0, 5.0, 4.0]), TWO)
    again = queue.admit("b1", _judged("b1", [6.0, 5.0, 4.0]), TWO)
    assert again.table.to_pylist() == first.table.to_pylist()
    assert again.counts == first.counts == {"needs_review": 2, "waiting": 1}
    # a row new to the batch (a rerun with a larger budget finished it) gets what is left: nothing
    grown = queue.admit("b1", _judged("b1", [6.0, 5.0, 4.0, 7.0]), TWO)
    assert grown.counts == {"needs_review": 2, "waiting": 2}
    assert queue.counts() == {"review": 2, "waiting": 2}


def test_a_rerun_keeps_an_auto_reject(tmp_path: Path) -> None:
    """A row routing rejected is a decision of the first admission too: the rerun keeps it (it
    once re-routed the row, found no live decision for it and failed with a KeyError)."""
    queue = ReviewQueue(tmp_path / "queue.sqlite")
    rows = _judged("b1", [0.0, 6.0], means=[1.0, 5.0])  # agreed low: auto_reject; disputed: review
    first = queue.admit("b1", rows, TWO)
    assert first.counts == {"auto_reject": 1, "needs_review": 1}
    again = queue.admit("b1", rows, TWO)
    assert again.table.to_pylist() == first.table.to_pylist()
    assert queue.counts() == {"review": 1}
