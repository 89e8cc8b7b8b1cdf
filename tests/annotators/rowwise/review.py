"""storage/schema/review.py's ``latest_copies`` before it worked on Arrow columns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def latest_copies(table: pa.Table) -> pa.Table:
    """Each (sample_id, batch) once: the copy with the longest decisions trail (ties: the first)."""
    if table.num_rows == 0:
        return table
    ids = table.column("sample_id").to_pylist()
    batches = table.column("batch").to_pylist()
    lengths = pc.fill_null(pc.list_value_length(table.column("decisions")), 0).to_pylist()
    best: dict[tuple[str, str], int] = {}
    for index, key in enumerate(zip(ids, batches, strict=True)):
        kept = best.get(key)
        if kept is None or lengths[index] > lengths[kept]:
            best[key] = index
    if len(best) == table.num_rows:
        return table
    return table.take(pa.array(sorted(best.values()), pa.int64()))
