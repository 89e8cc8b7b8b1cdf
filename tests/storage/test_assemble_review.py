"""Assembly leaves out every row no expert decided yet, through the one shared predicate, and
publishes a row promoted by a later batch's review budget from its own batch, once."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ptfactory.storage.assemble import assemble_sft
from ptfactory.storage.schema import from_records, sample_id


def _row(i: int, batch: str, *trail: tuple[str, str, str]) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    return {
        "sample_id": sample_id("sft", messages),
        "batch": batch,
        "kind": "sft",
        "messages": messages,
        "decisions": [{"stage": s, "verdict": v, "reason": r, "detail": None} for s, v, r in trail],
    }


ROUTE = ("route", "route", "needs_review")
WAIT = ("route", "wait", "waiting")
AUDIT = ("route", "route", "audit")
ACCEPT = ("review", "accept", "human_accept")


def test_pending_rows_are_left_out_and_counted() -> None:
    table = from_records(
        [
            _row(0, "b1", ("route", "accept", "auto_accept")),
            _row(1, "b1", ROUTE),
            _row(2, "b1", WAIT),
            _row(3, "b1", AUDIT),
            _row(4, "b1", ROUTE, ACCEPT),
            _row(5, "b1", AUDIT, ACCEPT),
            _row(6, "b1", ("route", "reject", "auto_reject")),
        ]
    )
    assembled = assemble_sft(table)
    assert [r["messages"][0]["content"] for r in assembled.table.to_pylist()] == ["q0", "q4", "q5"]
    assert assembled.skipped == {"dropped_upstream": 1, "awaiting_review": 3}


def test_a_promoted_row_is_decided_on_itself_and_published_once() -> None:
    # the review queue records a later batch's slot and the expert's label on the waiting row itself
    # (no copy in b2), and b2's routed copy of a sample b1 already queued is dropped: one copy each
    promoted = _row(1, "b1", WAIT, ROUTE, ACCEPT)
    queued_elsewhere = _row(1, "b2", ("route", "drop", "already_queued"))
    later = _row(2, "b2", ("route", "accept", "auto_accept"))
    assembled = assemble_sft(from_records([promoted, queued_elsewhere, later]))
    rows = assembled.table.to_pylist()
    assert sorted((r["messages"][0]["content"], r["batch"]) for r in rows) == [("q1", "b1"), ("q2", "b2")]
    assert assembled.skipped == {"dropped_upstream": 1}
    # still waiting in b1 (no slot yet): left out and counted, whatever b2 holds
    waiting = assemble_sft(from_records([_row(1, "b1", WAIT), queued_elsewhere, later]))
    assert [r["messages"][0]["content"] for r in waiting.table.to_pylist()] == ["q2"]
    assert waiting.skipped == {"dropped_upstream": 1, "awaiting_review": 1}
    # the same content in two batches is still kept once, from the first batch
    again = _row(2, "b3", ("route", "accept", "auto_accept"))
    twice = assemble_sft(pa.concat_tables([from_records([later]), from_records([again])]))
    assert twice.table.column("batch").to_pylist() == ["b2"]
    assert twice.skipped == {"duplicate_across_batches": 1}
