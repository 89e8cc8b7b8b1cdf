"""``ptf dedup``: near-duplicate clustering of a Parquet file, streamed in batches."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.errors import UserInputError
from ptfactory.filters.dedup.core import (
    DedupConfig,
    DedupResult,
    Hashed,
    Shingles,
    compact,
    compute_signatures,
    deduplicate,
)

__all__ = ["dedup_parquet"]

_BATCH_ROWS = 50_000


def _batches(reader: pq.ParquetFile, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
    """Batches of at most ``_BATCH_ROWS``, one row group at a time: a single ``iter_batches`` over
    the whole file keeps decoded buffers alive as it goes (+150 MB over 1M rows here), one per
    row group frees them when the group is done."""
    for group in range(reader.metadata.num_row_groups):
        yield from reader.iter_batches(batch_size=_BATCH_ROWS, row_groups=[group], columns=columns)


def dedup_parquet(
    source: Path,
    out: Path,
    text_column: str,
    config: DedupConfig,
    progress: Callable[[int, int], None] | None = None,
) -> DedupResult:
    """Write ``source``'s rows plus ``dedup_cluster``, ``dedup_representative``, ``dedup_jaccard`` to ``out``.

    The texts are read and hashed batch by batch; per row only LSH band keys, the text's hash and
    a signature stay in memory: 8-bit (b-bit MinHash) past ``config.exact_verify_max_docs`` rows,
    else 32-bit with the shingle sets for exact verification. ``out`` appears whole
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
    # Filled batch by batch, allocated once: no list of parts to concatenate (two copies at the end).
    bands = config.bands[0]
    signatures = np.empty((total, config.num_perm), np.uint32 if keep_shingles else np.uint8)
    exact, usable = np.empty(total, np.uint64), np.empty(total, np.bool_)
    keys = np.empty((total, bands), np.uint32)
    shingle_parts: list[Shingles] = []
    done = 0
    for batch in _batches(reader, [text_column]):
        part = compact(
            compute_signatures(batch.column(0), config, keep_shingles), config, bbit=not keep_shingles
        )
        end = done + batch.num_rows
        signatures[done:end], exact[done:end] = part.signatures, part.exact
        keys[done:end], usable[done:end] = part.keys, part.usable
        if part.shingles:
            shingle_parts.append(part.shingles)
        done = end
        if progress:
            progress(done, total)
    shingles = Shingles.concat(shingle_parts) if keep_shingles and shingle_parts else None
    hashed = Hashed(signatures[:done], exact[:done], shingles, keys[:done], usable[:done])
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
            for batch in _batches(reader, None):
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
