"""Assemble the rows of a dataset version from stage outputs of every batch so far."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.storage.schema import conform, dropped_mask, latest_copies, pending_review
from ptfactory.storage.schema.review import budget_exhausted_mask

__all__ = ["Assembled", "assemble_preference", "assemble_sft"]


@dataclass
class Assembled:
    table: pa.Table
    batches: list[str]
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows left out


def _last_role(table: pa.Table) -> pa.Array:
    messages = table.column("messages").combine_chunks()
    lengths = pc.list_value_length(messages)
    last = pc.subtract(lengths, 1)
    offsets = pc.add(messages.offsets[:-1], last)
    roles = pc.list_flatten(messages).field("role")
    return pc.take(roles, offsets)


def assemble_sft(rows: pa.Table) -> Assembled:
    """SFT and code rows (see :func:`_assemble`)."""
    return _assemble(rows, ("sft", "code"))


def assemble_preference(rows: pa.Table) -> Assembled:
    """Preference rows with both a chosen and a rejected answer (see :func:`_assemble`)."""
    return _assemble(rows, ("preference",))


def _assemble(rows: pa.Table, kinds: tuple[str, ...]) -> Assembled:
    """SFT-ready rows: not dropped, ending in an assistant turn, each sample once.

    A sample that appears in several batches (same content, same id) is kept once, from
    the first batch that produced it; a row copied into a later batch's routing (a waiting row
    that got a review slot there) counts in its newest copy only; rows still awaiting or waiting
    for review, or for a response, are left out and counted, not lost (they stay in their stage
    outputs).
    """
    table = latest_copies(conform(rows))
    table = table.filter(pc.is_in(table.column("kind"), value_set=pa.array(kinds)))
    batches = sorted(set(table.column("batch").to_pylist()))
    skipped: dict[str, int] = {}
    dropped = dropped_mask(table)
    # dropped because a run's budget ran out, not for what they say: a rerun may still publish them
    budget = int(pc.sum(budget_exhausted_mask(table)).as_py() or 0)
    skipped["budget_exhausted"] = budget
    skipped["dropped_upstream"] = int(pc.sum(dropped).as_py() or 0) - budget
    table = table.filter(pc.invert(dropped))
    pending = pa.array([pending_review(t) for t in table.column("decisions").to_pylist()], pa.bool_())
    skipped["awaiting_review"] = int(pc.sum(pending).as_py() or 0)
    table = table.filter(pc.invert(pending))
    if table.num_rows and "preference" in kinds:
        has_answer = pc.and_(
            pc.greater(pc.list_value_length(table.column("chosen")), 0),
            pc.greater(pc.list_value_length(table.column("rejected")), 0),
        )
        has_answer = pc.fill_null(has_answer, False)
        skipped["no_pair"] = table.num_rows - int(pc.sum(has_answer).as_py() or 0)
        table = table.filter(has_answer)
    elif table.num_rows:
        has_answer = pc.equal(_last_role(table), "assistant")
        skipped["no_response"] = table.num_rows - int(pc.sum(has_answer).as_py() or 0)
        table = table.filter(has_answer)
    ids = table.column("sample_id").to_pylist()
    first: dict[str, int] = {}
    for index, sid in enumerate(ids):
        first.setdefault(sid, index)
    skipped["duplicate_across_batches"] = len(ids) - len(first)
    if len(first) != len(ids):
        table = table.take(pa.array(sorted(first.values()), pa.int64()))
    return Assembled(table, batches, {k: v for k, v in skipped.items() if v})
