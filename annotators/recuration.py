"""Curation that costs what changed: the previous curated table, folded with what happened since its
cursor, instead of every batch's routed rows and every label each time.

What changed since the cursor (the review queue's sequence and the label log's):

- batches routed since (the queue's admissions): their routed output replaces their rows;
- review-queue rows changed since (a row promoted into a later batch's review slot, or settled
  after waiting too long): their queue record replaces their row;
- samples with new label events: their queue record (the row before any review) is curated again
  with all of their events (an update or a deletion changes the outcome).

Those rows are curated (:func:`~ptfactory.annotators.curation.curate`), the rest of the previous
table is kept as it was, and the pairs machines vouch for are made again over the whole table (from
the few rows they can come from). The figures (outcomes, agreement) are of the whole table and the
whole label log. A missing or foreign cursor (first curation, another queue, a reset ledger) makes
a full curation: every routed output read once.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.curation import DERIVED_PAIRS, Curated, _pairs, curate, summarize
from ptfactory.annotators.labelstudio.ledger import Ledger
from ptfactory.annotators.review_queue import ReviewQueue
from ptfactory.storage.schema import SAMPLE_SCHEMA, conform, pending_review

__all__ = ["CURSOR_KEY", "Cursor", "Recurated", "recurate"]

CURSOR_KEY = b"ptf.curation_cursor"
_CORRECTION_PAIR = "human_correction_pair"


@dataclass(frozen=True)
class Cursor:
    queue_store: str
    queue: int  # the review queue's sequence folded in
    labels: int  # the label log's last sequence folded in

    def to_metadata(self) -> dict[bytes, bytes]:
        body = {"queue_store": self.queue_store, "queue": self.queue, "labels": self.labels}
        return {CURSOR_KEY: json.dumps(body).encode()}

    @staticmethod
    def of(table: pa.Table | None) -> Cursor | None:
        """The cursor a curated table was written with, or None."""
        raw = (table.schema.metadata or {}).get(CURSOR_KEY) if table is not None else None
        if raw is None:
            return None
        body = json.loads(raw)
        return Cursor(str(body["queue_store"]), int(body["queue"]), int(body["labels"]))


@dataclass(frozen=True)
class Recurated:
    curated: Curated  # the whole table (its schema metadata holds the new cursor) and its figures
    cursor: Cursor
    batches_read: list[str]  # routed outputs read
    rows_curated: int  # rows curated again (the rest were kept as they were)
    full: bool  # no usable cursor: everything was curated


def _last_reasons(table: pa.Table) -> pa.Array:
    """The reason of each row's last decision (null for a row with none)."""
    decisions = table.column("decisions").combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(decisions), 0).to_numpy(zero_copy_only=False)
    reasons = pc.list_flatten(decisions).field("reason")
    last = np.cumsum(lengths) - 1
    has = lengths > 0
    taken = reasons.take(pa.array(np.where(has, last, 0), pa.int64())) if len(reasons) else None
    mask = pa.array(~has)
    return (
        pc.if_else(mask, pa.scalar(None, pa.string()), taken)
        if taken is not None
        else pa.nulls(len(lengths), pa.string())
    )


def _is_correction_pair(table: pa.Table, ids: set[str]) -> pa.Array:
    """Rows that are an expert correction's (corrected, original) pair of one of ``ids``."""
    parent = pc.struct_field(table.column("provenance"), "parent_id")
    return pc.and_(
        pc.equal(_last_reasons(table), _CORRECTION_PAIR).fill_null(False),
        pc.is_in(parent, value_set=pa.array(sorted(ids), pa.string())).fill_null(False),
    )


def _without(table: pa.Table, ids: set[str], batches: set[str]) -> pa.Table:
    """``table`` less the rows of ``batches``, of ``ids``, their correction pairs and every derived pair."""
    if table.num_rows == 0:
        return table
    method = pc.struct_field(table.column("provenance"), "method").fill_null("")
    gone = pc.or_(
        pc.or_(
            pc.is_in(table.column("batch"), value_set=pa.array(sorted(batches), pa.string())).fill_null(
                False
            ),
            pc.is_in(table.column("sample_id"), value_set=pa.array(sorted(ids), pa.string())).fill_null(
                False
            ),
        ),
        pc.or_(_is_correction_pair(table, ids), pc.is_in(method, value_set=pa.array(DERIVED_PAIRS))),
    )
    return table.filter(pc.invert(gone))


def recurate(
    previous: pa.Table | None,
    queue: ReviewQueue,
    ledger: Ledger,
    routed: Callable[[str], pa.Table | None],
    every_batch: Callable[[], Iterable[str]],
    *,
    accept_at: float = 7.0,
) -> Recurated:
    """The curated table after what changed since ``previous``' cursor (the module doc).

    ``routed(batch)``: that batch's routed output (None if it has none); ``every_batch()``: the
    batches to read for a full curation."""
    store, seq = queue.position()
    labels_now = ledger.last_seq()
    cursor = Cursor.of(previous)
    full = (
        previous is None
        or cursor is None
        or cursor.queue_store != store
        or cursor.queue > seq
        or cursor.labels > labels_now
    )
    if full or cursor is None:
        batches, changed_rows, labelled = list(every_batch()), conform(SAMPLE_SCHEMA.empty_table()), set()
        previous = conform(SAMPLE_SCHEMA.empty_table())
    else:
        changes = queue.changes(cursor.queue)
        batches, changed_rows = changes.batches, changes.rows
        labelled = ledger.labelled_since(cursor.labels)
        previous = conform(previous)
    parts = [t for b in batches if (t := routed(b)) is not None]
    fresh = (
        conform(pa.concat_tables([conform(t) for t in parts]))
        if parts
        else conform(SAMPLE_SCHEMA.empty_table())
    )
    ids = (
        set(fresh.column("sample_id").to_pylist())
        | set(changed_rows.column("sample_id").to_pylist())
        | labelled
    )
    # the queue holds the newest state of every row it ever held: it wins over a routed output
    queued = queue.records(ids)
    base = _base(fresh, queued, previous, ids)
    events = ledger.events(set(base.column("sample_id").to_pylist()))
    curated = curate(base, events, accept_at, pairs=False).table
    kept = _without(previous, ids, set(batches))
    table = pa.concat_tables([kept, conform(curated)])
    summary = summarize(_with_pairs(table), ledger.events(), accept_at)
    new_cursor = Cursor(store, seq, labels_now)
    summary.table = summary.table.replace_schema_metadata(
        {**(summary.table.schema.metadata or {}), **new_cursor.to_metadata()}
    )
    _drain(queue, summary.table, set(queued.column("sample_id").to_pylist()))
    return Recurated(summary, new_cursor, sorted(set(batches)), base.num_rows, full)


def _keys(table: pa.Table) -> pa.Array:
    """Each row's (sample_id, batch), as one string."""
    batch = table.column("batch").fill_null("")
    return pc.binary_join_element_wise(table.column("sample_id"), batch, "\x00")


def _base(fresh: pa.Table, queued: pa.Table, previous: pa.Table, ids: set[str]) -> pa.Table:
    """The rows to curate again, as they were before any review: a row's queue record (its newest
    state), else its routed row, else (another copy of a labelled sample) its previous row."""
    in_queue = _keys(queued)
    routed = fresh.filter(pc.invert(pc.is_in(_keys(fresh), value_set=in_queue)))
    covered = pa.concat_arrays([in_queue.combine_chunks(), _keys(routed).combine_chunks()])
    method = pc.struct_field(previous.column("provenance"), "method").fill_null("")
    old = previous.filter(
        pc.and_(
            pc.and_(
                pc.is_in(previous.column("sample_id"), value_set=pa.array(sorted(ids), pa.string())),
                pc.invert(pc.is_in(_keys(previous), value_set=covered)),
            ),
            pc.invert(pc.is_in(method, value_set=pa.array(DERIVED_PAIRS))),
        )
    )
    old = old.filter(pc.invert(_is_correction_pair(old, ids)))
    return conform(pa.concat_tables([conform(routed), conform(queued), conform(old)]))


def _with_pairs(table: pa.Table) -> pa.Table:
    """``table`` and the pairs machines vouch for, made again over it."""
    made = _pairs(table, Counter())
    if not made:
        return table
    return pa.concat_tables([table, pa.Table.from_pylist(made, schema=SAMPLE_SCHEMA)])


def _drain(queue: ReviewQueue, table: pa.Table, queued: set[str]) -> None:
    """Queue rows an expert's label now decides leave the review state, and come back when it goes."""
    if not queued:
        return
    rows = table.filter(pc.is_in(table.column("sample_id"), value_set=pa.array(sorted(queued), pa.string())))
    decided: list[str] = []
    undecided: list[str] = []
    for sid, trail in zip(
        rows.column("sample_id").to_pylist(), rows.column("decisions").to_pylist(), strict=True
    ):
        (undecided if pending_review(trail) else decided).append(sid)
    queue.mark(decided, undecided)
