"""The decisions trail and the scores of a row: what stages append, and which rows are still live.

Every stage calls these on whole batches, so they work on Arrow columns (offsets, struct fields,
``take``), never on ``to_pylist()`` copies of the table: a stage's cost is its own decisions, not
a Python round trip of every row's trail and scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.errors import SchemaError
from ptfactory.storage.schema.record import DECISION, SAMPLE_SCHEMA, SCORES

__all__ = [
    "add_decision",
    "checkable_mask",
    "dropped_mask",
    "live_rows",
    "rounded",
    "set_score",
    "set_scores",
]

_DECISIONS = pa.list_(DECISION)


def _column(table: pa.Table, name: str) -> Any:
    column = table.column(name)
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


def checkable_mask(table: pa.Table) -> np.ndarray[Any, Any]:
    """True for rows a verifier can check: tests, or a ``reference`` with an answer, a procedural
    task's family or constraints (a row derived from a seed by self-instruct has none). Dedup
    keeps such a row over its paraphrases."""
    out = np.zeros(table.num_rows, dtype=bool)
    if "tests" in table.column_names:
        tests = _column(table, "tests")
        out |= pc.fill_null(pc.greater(pc.utf8_length(tests), 0), False).to_numpy(zero_copy_only=False)
    if "reference" in table.column_names:
        reference = _column(table, "reference")
        for name in ("answer", "family", "constraints"):
            if reference.type.get_field_index(name) >= 0:
                values = pc.struct_field(reference, name)
                present = pc.fill_null(pc.greater(pc.utf8_length(values), 0), False)
                out |= present.to_numpy(zero_copy_only=False)
    return out


def dropped_mask(table: pa.Table) -> pa.Array:
    """True for rows that some stage dropped (any decision with verdict ``drop`` or ``reject``)."""
    decisions = _column(table, "decisions")
    dropped = np.zeros(table.num_rows, dtype=bool)
    flat = pc.list_flatten(decisions)
    if len(flat):
        hit = pc.is_in(flat.field("verdict"), value_set=pa.array(["drop", "reject"])).fill_null(False)
        parents = pc.list_parent_indices(decisions)
        dropped[pc.filter(parents, hit).to_numpy(zero_copy_only=False)] = True
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
    n = table.num_rows
    targets = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    if len(verdicts) != len(targets) or len(reasons) != len(targets):
        raise SchemaError(
            f"add_decision got {len(verdicts)} verdicts and {len(reasons)} reasons for {len(targets)} rows"
        )
    if len(targets) and (targets.min() < 0 or targets.max() >= n or len(np.unique(targets)) != len(targets)):
        raise SchemaError(f"add_decision rows must be distinct indices below {n}")
    details = details if details is not None else [None] * len(targets)
    added = pa.StructArray.from_arrays(
        [
            pa.repeat(pa.scalar(stage, pa.string()), len(targets)),
            pa.array(verdicts, pa.string()),
            pa.array(reasons, pa.string()),
            pa.array(details, pa.string()),
        ],
        fields=list(DECISION),
    )
    old = _column(table, "decisions")
    old_len = pc.list_value_length(old).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    old_flat = pc.list_flatten(old)
    extra = np.zeros(n, dtype=np.int64)
    extra[targets] = 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(old_len + extra, out=offsets[1:])
    # where each old decision and each added one lands in the new flat array
    old_row = np.repeat(np.arange(n, dtype=np.int64), old_len)
    old_start = np.concatenate([[0], np.cumsum(old_len)[:-1]]).astype(np.int64)
    order = np.empty(int(offsets[-1]), dtype=np.int64)
    order[offsets[old_row] + (np.arange(len(old_flat), dtype=np.int64) - old_start[old_row])] = np.arange(
        len(old_flat), dtype=np.int64
    )
    order[offsets[targets] + old_len[targets]] = len(old_flat) + np.arange(len(targets), dtype=np.int64)
    values = pa.concat_arrays([old_flat.cast(DECISION), added]).take(pa.array(order))
    # a row with no trail that gets no decision keeps no trail (null), as it came
    untouched_null = pc.and_(pc.is_null(old), pc.invert(pa.array(extra.astype(bool)))).to_numpy(
        zero_copy_only=False
    )
    trail = pa.ListArray.from_arrays(
        pa.array(offsets.astype(np.int32)), values, type=_DECISIONS, mask=pa.array(untouched_null)
    )
    index = table.schema.get_field_index("decisions")
    return table.set_column(index, SAMPLE_SCHEMA.field("decisions"), trail)


def live_rows(table: pa.Table) -> list[int]:
    """Indices of the rows no stage has dropped: the ones the next stage looks at."""
    live: list[int] = np.nonzero(~dropped_mask(table).to_numpy(zero_copy_only=False))[0].tolist()
    return live


def set_score(
    table: pa.Table, name: str, values: Sequence[Any], *, rows: Sequence[int] | None = None
) -> pa.Table:
    """Set ``scores.<name>`` for every row (or only ``rows``, which ``values`` then line up with),
    keeping the other scores and the other rows' ``name``."""
    return set_scores(table, {name: values}, rows=rows)


def set_scores(
    table: pa.Table, values: Mapping[str, Sequence[Any]], *, rows: Sequence[int] | None = None
) -> pa.Table:
    """:func:`set_score` for several scores at once (the scores struct is taken apart and put back
    together once, not once a score)."""
    expected = table.num_rows if rows is None else len(rows)
    for given in values.values():
        if len(given) != expected:
            raise SchemaError(f"set_score got {len(given)} values for {expected} rows")
    scores = _column(table, "scores").cast(SCORES)
    # flatten() folds a null row's nulls into its fields: a row without scores gets only `name`
    fields = dict(zip((f.name for f in SCORES), scores.flatten(), strict=True))
    order = None
    if rows is not None:
        order = np.arange(table.num_rows, dtype=np.int64)
        order[np.asarray(rows, dtype=np.int64)] = table.num_rows + np.arange(expected, dtype=np.int64)
    for name, given in values.items():
        array = given if isinstance(given, pa.Array) else pa.array(given, SCORES.field(name).type)
        if order is None:
            fields[name] = array
        else:
            fields[name] = pa.concat_arrays([fields[name], array.cast(fields[name].type)]).take(
                pa.array(order)
            )
    merged = pa.StructArray.from_arrays([fields[f.name] for f in SCORES], fields=list(SCORES))
    index = table.schema.get_field_index("scores")
    return table.set_column(index, SAMPLE_SCHEMA.field("scores"), merged)


def rounded(values: np.ndarray[Any, Any], present: np.ndarray[Any, Any]) -> pa.Array:
    """``round(x, 4)`` of each present value, as scores are stored (Python's: the double nearest
    the correctly rounded decimal), null elsewhere. ``rint(x * 1e4) / 1e4`` is that double unless ``x * 1e4`` lies within
    its own rounding error of a half (there numpy and Python can round apart): those few values, and
    ones too large or not finite, go through ``round`` itself."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = values * 1e4
        out = np.rint(scaled) / 1e4
        near_half = np.abs(np.abs(scaled - np.trunc(scaled)) - 0.5) < 1e-6
        risky = present & (near_half | ~(np.abs(scaled) < 2.0**26))
    for i in np.flatnonzero(risky).tolist():
        out[i] = round(float(values[i]), 4)
    return pa.array(out, pa.float64(), mask=~present)
