"""Assembly leaves out every row no expert decided yet, through the one shared predicate, and
counts a row copied into a later batch's routing once, in its newest state."""

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


def test_a_promoted_copy_supersedes_its_waiting_original() -> None:
    waiting = _row(1, "b1", WAIT)
    promoted = _row(1, "b1", WAIT, ROUTE, ACCEPT)  # b2's copy, curated
    later = _row(2, "b2", ("route", "accept", "auto_accept"))
    assembled = assemble_sft(from_records([waiting, later, promoted]))
    assert sorted(r["messages"][0]["content"] for r in assembled.table.to_pylist()) == ["q1", "q2"]
    assert assembled.skipped == {}
    # the same content in two batches is still kept once, from the first batch
    again = _row(2, "b3", ("route", "accept", "auto_accept"))
    twice = assemble_sft(pa.concat_tables([from_records([later]), from_records([again])]))
    assert twice.table.column("batch").to_pylist() == ["b2"]
    assert twice.skipped == {"duplicate_across_batches": 1}
