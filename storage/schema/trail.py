"""The decisions trail and the scores of a row: what stages append, and which rows are still live."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.errors import SchemaError
from ptfactory.storage.schema.record import DECISION, SAMPLE_SCHEMA, SCORES

__all__ = ["add_decision", "dropped_mask", "live_rows", "set_score"]


def dropped_mask(table: pa.Table) -> pa.Array:
    """True for rows that some stage dropped (any decision with verdict ``drop`` or ``reject``)."""
    decisions = table.column("decisions").combine_chunks()
    flat = pc.list_flatten(decisions)
    dropped = [False] * table.num_rows
    if len(flat):
        verdict = flat.field("verdict")
        hit = pc.is_in(verdict, value_set=pa.array(["drop", "reject"]))
        parents = pc.list_parent_indices(decisions)
        for parent in pc.filter(parents, hit).to_pylist():
            dropped[parent] = True
    return pa.array(dropped, pa.bool_())


def add_decision(
    table: pa.Table,
    stage: str,
    verdicts: Sequence[str],
    reasons: Sequence[str],
    details: Sequence[str | None] | None = None,
    *,
    rows: Sequence[int] | None = None,
) -> pa.Table:
    """Append one decision to the ``decisions`` trail of each row in ``rows`` (default: every row).

    ``verdicts``, ``reasons`` and ``details`` line up with ``rows``; other rows are left as they were
    (a stage does not judge rows an earlier stage dropped).
    """
    targets = list(range(table.num_rows)) if rows is None else list(rows)
    if len(verdicts) != len(targets) or len(reasons) != len(targets):
        raise SchemaError(
            f"add_decision got {len(verdicts)} verdicts and {len(reasons)} reasons for {len(targets)} rows"
        )
    details = details if details is not None else [None] * len(targets)
    trail = table.column("decisions").to_pylist()
    for row, verdict, reason, detail in zip(targets, verdicts, reasons, details, strict=True):
        trail[row] = [
            *(trail[row] or []),
            {"stage": stage, "verdict": verdict, "reason": reason, "detail": detail},
        ]
    index = table.schema.get_field_index("decisions")
    return table.set_column(index, SAMPLE_SCHEMA.field("decisions"), pa.array(trail, pa.list_(DECISION)))


def live_rows(table: pa.Table) -> list[int]:
    """Indices of the rows no stage has dropped: the ones the next stage looks at."""
    return [i for i, dropped in enumerate(dropped_mask(table).to_pylist()) if not dropped]


def set_score(table: pa.Table, name: str, values: Sequence[Any]) -> pa.Table:
    """Set ``scores.<name>`` for every row, keeping the other scores."""
    if len(values) != table.num_rows:
        raise SchemaError(f"set_score got {len(values)} values for {table.num_rows} rows")
    scores = table.column("scores").to_pylist()
    merged = [{**(old or {}), name: value} for old, value in zip(scores, values, strict=True)]
    index = table.schema.get_field_index("scores")
    return table.set_column(index, SAMPLE_SCHEMA.field("scores"), pa.array(merged, SCORES))
