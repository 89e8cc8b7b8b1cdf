"""Where a row stands with expert review, read from its decisions trail: one definition for all stages.

Routing (stage ``route``) gives a live row ``accept`` / ``reject`` (automatic), ``route`` (sent to
an expert) or ``wait`` (no review slot yet); curation (stage ``review``) records what the expert
decided. Only the last decision of these two stages tells where a row stands:

- ``awaiting_review``: a ``route`` verdict, in a review queue, undecided (push, curation);
- ``is_waiting``: a ``wait`` verdict, over its batch's review budget (routing: it competes again);
- ``pending_review``: either, so nothing an expert decided and not publishable (assembly).

Apart from review, ``budget_exhausted_mask``: rows a stage could not finish within the run's budget,
or held back from a batch that stopped at its budget (a ``drop``: never published; a rerun finishes them).

A row that waits in batch A and gets a review slot from a later batch C's budget is not copied
anywhere: the review queue (``annotators/review_queue.py``) records its new decision on the row,
and curation takes a row's state from the queue, so each row has one copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "AUDIT_REASON",
    "BUDGET_REASON",
    "audited_verdict",
    "awaiting_review",
    "budget_exhausted_mask",
    "is_waiting",
    "pending_review",
    "review_masks",
]

ROUTE_STAGE = "route"
REVIEW_STAGE = "review"
AUDIT_REASON = "audit"  # a blind sample of the automatic verdicts; detail: "audit of auto_accept; ..."
BUDGET_REASON = "budget_exhausted"  # the reason of a drop decision made when a run's budget ran out

Trail = Sequence[Mapping[str, Any]] | None


def _last(trail: Trail) -> Mapping[str, Any] | None:
    for decision in reversed(trail or []):
        if decision["stage"] in (ROUTE_STAGE, REVIEW_STAGE):
            return decision
    return None


def awaiting_review(trail: Trail) -> bool:
    """Routed to an expert (a review slot, an audit, or routed over budget) and not decided by one yet."""
    last = _last(trail)
    return last is not None and last["stage"] == ROUTE_STAGE and last["verdict"] == "route"


def is_waiting(trail: Trail) -> bool:
    """Over its batch's review budget: competes for a later batch's budget, never pushed as it is."""
    last = _last(trail)
    return last is not None and last["stage"] == ROUTE_STAGE and last["verdict"] == "wait"


def pending_review(trail: Trail) -> bool:
    """Awaiting an expert or waiting for a slot: no one decided this row, so it is not published."""
    return awaiting_review(trail) or is_waiting(trail)


def budget_exhausted_mask(table: pa.Table) -> pa.Array:
    """True for rows dropped because a budget ran out (unfinished, or held back), not for what they
    say; on the Arrow columns (assembly reads whole batches)."""
    decisions = table.column("decisions").combine_chunks()
    flat = pc.list_flatten(decisions)
    if not len(flat):
        return pa.array([False] * table.num_rows, pa.bool_())
    hit = pc.and_(pc.equal(flat.field("reason"), BUDGET_REASON), pc.equal(flat.field("verdict"), "drop"))
    rows = pc.filter(pc.list_parent_indices(decisions), hit.fill_null(False))
    return pc.is_in(pa.array(range(table.num_rows), pa.int64()), value_set=rows.cast(pa.int64()))


def audited_verdict(trail: Trail) -> str | None:
    """``auto_accept`` / ``auto_reject``: what routing would have done with a row it sent to audit
    (None for any other row), so the judges can be scored against the expert on these rows."""
    last = next((d for d in reversed(trail or []) if d["stage"] == ROUTE_STAGE), None)
    if last is None or last["reason"] != AUDIT_REASON:
        return None
    head = str(last["detail"] or "").split(";", 1)[0]
    return head.removeprefix("audit of ").strip() or None


def review_masks(table: pa.Table) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(:func:`awaiting_review`, :func:`is_waiting`) of every row at once, on the Arrow columns of its
    ``decisions`` (whole batches: the row-by-row predicates would copy every trail to Python)."""
    n = table.num_rows
    awaiting, waiting = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    decisions = table.column("decisions")
    decisions = decisions.combine_chunks() if isinstance(decisions, pa.ChunkedArray) else decisions
    flat = pc.list_flatten(decisions)
    if not len(flat):
        return awaiting, waiting
    stage = flat.field("stage")
    hit = np.flatnonzero(
        pc.is_in(stage, value_set=pa.array([ROUTE_STAGE, REVIEW_STAGE])).fill_null(False).to_numpy(False)
    )
    if not len(hit):
        return awaiting, waiting
    parents = pc.list_parent_indices(decisions).to_numpy(False)[hit]
    # flat positions ascend with their rows: the last hit of each row ends its run of parents
    ends = np.append(parents[1:] != parents[:-1], True)
    rows, last = parents[ends], hit[ends]
    taken = pa.array(last, pa.int64())
    routed = pc.equal(stage.take(taken), ROUTE_STAGE).fill_null(False).to_numpy(False)
    verdict = flat.field("verdict").take(taken)
    awaiting[rows] = routed & pc.equal(verdict, "route").fill_null(False).to_numpy(False)
    waiting[rows] = routed & pc.equal(verdict, "wait").fill_null(False).to_numpy(False)
    return awaiting, waiting
