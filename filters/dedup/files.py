"""``ptf dedup``: near-duplicate clustering of a Parquet file, streamed in batches."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from filters.dedup.core import DedupConfig, DedupResult, Hashed, Shingles, compute_signatures, deduplicate
from ptfactory.errors import UserInputError

__all__ = ["dedup_parquet"]

_BATCH_ROWS = 50_000


def dedup_parquet(
    source: Path,
    out: Path,
    text_column: str,
    config: DedupConfig,
    progress: Callable[[int, int], None] | None = None,
) -> DedupResult:
    """Write ``source``'s rows plus ``dedup_cluster``, ``dedup_representative``, ``dedup_jaccard`` to ``out``.

    The texts are read and hashed batch by batch; only signatures (and, for inputs up to
    ``config.exact_verify_max_docs`` rows, shingle sets) stay in memory. ``out`` appears whole
    or not at all.
    """
    try:
        reader = pq.ParquetFile(source)
    except (OSError, pa.ArrowException) as exc:
        raise UserInputError(f"{source}: not a readable Parquet file ({exc})") from None
    schema = reader.schema_arrow
    if text_column not in schema.names:
        raise UserInputError(f"{source} has no column {text_column!r}; columns: {', '.join(schema.names)}")
    kind = schema.field(text_column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise UserInputError(f"column {text_column!r} is {kind}, not text; pick a string column")
    total = reader.metadata.num_rows
    keep_shingles = total <= config.exact_verify_max_docs
    parts: list[Hashed] = []
    done = 0
    for batch in reader.iter_batches(batch_size=_BATCH_ROWS, columns=[text_column]):
        parts.append(compute_signatures(batch.column(0), config, keep_shingles))
        done += batch.num_rows
        if progress:
            progress(done, total)
    if parts:
        shingles = Shingles.concat([p.shingles for p in parts if p.shingles]) if keep_shingles else None
        hashed = Hashed(
            np.concatenate([p.signatures for p in parts]), np.concatenate([p.exact for p in parts]), shingles
        )
    else:
        hashed = Hashed(np.zeros((0, config.num_perm), np.uint32), np.zeros(0, np.uint64), None)
    result = deduplicate([], config, hashed=hashed)

    tmp = out.with_name(f".tmp-{os.getpid()}-{out.name}")
    out.parent.mkdir(parents=True, exist_ok=True)
    extra = [
        pa.field("dedup_cluster", pa.int64()),
        pa.field("dedup_representative", pa.bool_()),
        pa.field("dedup_jaccard", pa.float64()),
    ]
    try:
        with pq.ParquetWriter(tmp, pa.schema([*schema, *extra]), compression="zstd") as writer:
            start = 0
            for batch in reader.iter_batches(batch_size=_BATCH_ROWS):
                end = start + batch.num_rows
                columns = [
                    *batch.columns,
                    pa.array(result.cluster[start:end]),
                    pa.array(result.representative[start:end]),
                    pa.array(result.jaccard[start:end].round(4)),
                ]
                writer.write_table(pa.Table.from_arrays(columns, schema=writer.schema))
                start = end
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return result
