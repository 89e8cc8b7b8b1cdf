"""The summary statistics a manifest records about a version's rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["table_stats"]


def table_stats(splits: Mapping[str, pa.Table]) -> dict[str, Any]:
    stats: dict[str, Any] = {"rows_per_split": {k: t.num_rows for k, t in splits.items()}}
    tables = [t for t in splits.values() if t.num_rows]
    if not tables:
        return stats
    table = pa.concat_tables(tables)
    kinds = pc.value_counts(table.column("kind").combine_chunks())
    stats["rows_per_kind"] = {v["values"]: v["counts"] for v in kinds.to_pylist()}
    batches = pc.value_counts(table.column("batch").combine_chunks())
    stats["rows_per_batch"] = {v["values"]: v["counts"] for v in batches.to_pylist()}
    turns = pc.list_value_length(table.column("messages"))
    stats["mean_turns"] = round(float(pc.mean(turns).as_py() or 0.0), 3)
    return stats
