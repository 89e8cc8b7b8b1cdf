"""Parquet shards: deterministic zstd writing, sha256 on the way out, verification on the way in."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import IO, Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.errors import ShardIntegrityError
from ptfactory.storage.fs import Store

__all__ = [
    "PARQUET_OPTIONS",
    "ShardInfo",
    "bucket_count",
    "bucket_files",
    "bucket_fingerprint",
    "bucket_index",
    "bucket_of",
    "copy_verified",
    "hash_file",
    "read_shard",
    "row_hashes",
    "shard_name",
    "verify_shard",
    "write_buckets",
    "write_part",
    "write_shards",
]

# Fixed writer options: the same rows must give the same bytes, publish after publish.
PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "compression_level": 3}
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ShardInfo:
    file: str
    sha256: str
    rows: int
    bytes: int
    # bucketed shards (``write_buckets``): a hash of the rows, so an unchanged bucket is seen
    # without writing it; and, on a shard reused from an earlier version, the version whose
    # publish wrote these bytes (the catalog indexes its rows there, once)
    fingerprint: str | None = None
    reused_from: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k in _REQUIRED}


_REQUIRED = ("file", "sha256", "rows", "bytes")


def shard_name(index: int, prefix: str = "part") -> str:
    return f"{prefix}-{index:05d}.parquet"


class _HashingWriter(io.RawIOBase):
    """A file object that hashes what passes through it, so a shard is read once: never back."""

    def __init__(self, sink: IO[bytes]) -> None:
        self.sink = sink
        self.digest = hashlib.sha256()
        self.written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.digest.update(view)
        self.sink.write(view)
        self.written += len(view)
        return len(view)


def write_shards(
    table: pa.Table,
    store: Store,
    directory: str,
    shard_rows: int,
    *,
    prefix: str = "part",
    order: pa.Array | None = None,
    workers: int | None = None,
) -> list[ShardInfo]:
    """Write ``table`` (rows taken in ``order`` if given) as shards of at most ``shard_rows`` rows.

    Shards are compressed in parallel threads (Arrow releases the GIL while encoding), and
    each thread gathers its own rows, so sorting costs no extra pass. An empty table gives one
    empty shard, so every version has a schema on disk.
    """
    if shard_rows <= 0:
        raise ValueError(f"shard_rows must be positive, got {shard_rows}")
    starts = list(range(0, max(table.num_rows, 1), shard_rows))

    def write_one(index: int) -> ShardInfo:
        start = starts[index]
        part = (
            table.take(order.slice(start, shard_rows))
            if order is not None
            else table.slice(start, shard_rows)
        )
        name = shard_name(index, prefix)
        sha, size = write_part(part, store, store.path(directory, name))
        return ShardInfo(name, sha, part.num_rows, size)

    if len(starts) == 1:
        return [write_one(0)]
    with ThreadPoolExecutor(max_workers=min(workers or os.cpu_count() or 1, len(starts))) as pool:
        return list(pool.map(write_one, range(len(starts))))


def write_part(part: pa.Table, store: Store, path: str) -> tuple[str, int]:
    """Write one shard atomically; its sha256 and size, hashed on the way out."""
    with store.atomic_writer(path) as handle:
        writer = _HashingWriter(handle)
        pq.write_table(part, writer, **PARQUET_OPTIONS)
    return writer.digest.hexdigest(), writer.written


def bucket_count(rows: int, shard_rows: int, previous: int | None = None) -> int:
    """Buckets for a split. A first version: the power of two at or above ``rows / shard_rows``.
    A later one keeps the parent's count, so unchanged buckets keep their files; it doubles only
    once the average bucket passes ``2 * shard_rows`` and halves once it falls under a quarter
    (each a full rewrite, rare: the count moves by powers of two with a 8x dead band)."""
    if shard_rows <= 0:
        raise ValueError(f"shard_rows must be positive, got {shard_rows}")
    if not previous:
        return 1 << (max(1, -(-rows // shard_rows)) - 1).bit_length()
    count = previous
    while rows > 2 * shard_rows * count:
        count *= 2
    while count > 1 and 4 * rows < shard_rows * count:
        count //= 2
    return count


def bucket_of(ids: pa.Array | pa.ChunkedArray) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """A stable 32-bit key per sample id: its leading 8 hex digits (ids are content hashes, so these
    are already uniform), or the first 4 bytes of its blake2b for an id that is not hex."""
    series = pl.Series(pa.chunked_array(ids) if isinstance(ids, pa.Array) else ids)
    head = series.str.slice(0, 8).str.to_integer(base=16, strict=False)
    values = head.fill_null(0).cast(pl.UInt64).to_numpy().copy()
    for index in np.flatnonzero(head.is_null().to_numpy()):
        values[index] = int.from_bytes(hashlib.blake2b(str(series[index]).encode(), digest_size=4).digest())
    return values


def row_hashes(table: pa.Table) -> np.ndarray[Any, np.dtype[np.uint64]] | None:
    """A uint64 per row (polars ``hash_rows``, nested columns too); None for a column polars cannot
    hash: then no shard has a fingerprint and every one is written, as before buckets."""
    if not table.num_rows:
        return np.zeros(0, np.uint64)
    try:
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        return frame.hash_rows().to_numpy()
    except (pl.exceptions.PolarsError, pa.ArrowException, TypeError, ValueError):
        return None


def bucket_fingerprint(schema: pa.Schema, buckets: int, hashes: np.ndarray[Any, np.dtype[Any]]) -> str:
    """What identifies a bucket's rows: its rows' hashes in shard order, with the schema and count."""
    digest = hashlib.blake2b(f"{schema}|{buckets}".encode(), digest_size=16)
    digest.update(np.ascontiguousarray(hashes, np.uint64).tobytes())
    return digest.hexdigest()


def bucket_index(ids: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The bucket (of ``buckets``) of each sample id: the k-th of equal ranges of its 32-bit key."""
    return ((bucket_of(ids) * np.uint64(buckets)) >> np.uint64(32)).astype(np.int64)


def bucket_files(ids: pa.Array | pa.ChunkedArray, files: list[str], buckets: int) -> list[str]:
    """Of a split's bucketed shard ``files``, those of the buckets ``ids`` fall in (where they are)."""
    if not files or not len(ids):
        return []
    prefix = files[0].rsplit("-", 1)[0]
    wanted = {shard_name(int(k), prefix) for k in np.unique(bucket_index(ids, buckets))}
    return [f for f in files if f in wanted]


def write_buckets(
    table: pa.Table,
    store: Store,
    directory: str,
    *,
    buckets: int,
    prefix: str,
    order: pa.Array,
    previous: Mapping[str, ShardInfo] | None = None,
    place: Callable[[ShardInfo, str], None] | None = None,
    workers: int | None = None,
    hashes: np.ndarray[Any, np.dtype[np.uint64]] | None = None,
) -> tuple[list[ShardInfo], dict[str, pa.Array]]:
    """Write ``table`` as one shard per non-empty bucket, rows in ``order`` within a bucket.

    Bucket ``k`` holds the ids whose key (``bucket_of``) falls in the k-th of ``buckets`` equal
    ranges of 32 bits: hex ids in order, so shards stay sorted by ``sample_id`` end to end and a
    doubling splits each bucket in two. Shards are named by bucket (``<prefix>-<bucket>.parquet``) so a
    bucket keeps its file from version to version.

    A bucket whose fingerprint (a hash of its rows' hashes) equals the shard of the same name
    in ``previous`` is not written: ``place(old, path)`` puts the old bytes there (a hard link,
    a server-side copy) and the shard keeps the old sha256. Returns the shards and, for the
    shards written, their sample ids in row order.
    """
    order_np = order.to_numpy()
    of_row = bucket_index(table.column("sample_id"), buckets)[order_np] if table.num_rows else order_np
    rows_idx = order_np[np.argsort(of_row, kind="stable")]
    counts = np.bincount(of_row, minlength=buckets)
    starts = np.concatenate([[0], np.cumsum(counts)])
    if hashes is None:
        hashes = row_hashes(table)
    wanted = [k for k in range(buckets) if counts[k]] or [0]
    old = previous or {}

    def one(bucket: int) -> tuple[ShardInfo, pa.Array | None]:
        idx = rows_idx[starts[bucket] : starts[bucket + 1]]
        fingerprint = bucket_fingerprint(table.schema, buckets, hashes[idx]) if hashes is not None else None
        name = shard_name(bucket, prefix)
        parent = old.get(name)
        path = store.path(directory, name)
        if (
            place is not None
            and parent is not None
            and fingerprint is not None
            and (parent.fingerprint, parent.rows) == (fingerprint, len(idx))
        ):
            place(parent, path)
            return ShardInfo(
                name, parent.sha256, parent.rows, parent.bytes, fingerprint, parent.reused_from
            ), None
        part = table.take(pa.array(idx, pa.int64()))
        sha, size = write_part(part, store, path)
        return ShardInfo(name, sha, part.num_rows, size, fingerprint), part.column(
            "sample_id"
        ).combine_chunks()

    with ThreadPoolExecutor(max_workers=max(1, min(workers or os.cpu_count() or 1, len(wanted)))) as pool:
        done = list(pool.map(one, wanted))
    return [s for s, _ in done], {s.file: ids for s, ids in done if ids is not None}


def _chunks(handle: IO[bytes]) -> Iterator[bytes]:
    while chunk := handle.read(_CHUNK):
        yield chunk


def hash_file(store: Store, path: str) -> tuple[str, int]:
    """sha256 hex digest and size of a file."""
    digest = hashlib.sha256()
    size = 0
    with store.open(path, "rb") as handle:
        for chunk in _chunks(handle):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def verify_shard(store: Store, directory: str, shard: ShardInfo) -> None:
    """Raise :class:`ShardIntegrityError` naming the file if it is missing or differs from the manifest."""
    path = store.path(directory, shard.file)
    if not store.exists(path):
        raise ShardIntegrityError(f"shard {path} is missing; the version is damaged, re-publish it")
    digest, size = hash_file(store, path)
    if size != shard.bytes or digest != shard.sha256:
        raise ShardIntegrityError(
            f"shard {path} is corrupt: sha256 {digest[:16]}… ({size} bytes) but the manifest "
            f"recorded {shard.sha256[:16]}… ({shard.bytes} bytes)"
        )


def copy_verified(store: Store, directory: str, shard: ShardInfo, dest: IO[bytes]) -> None:
    """Copy a shard into ``dest`` while hashing it; raise if what was read is not what was published."""
    path = store.path(directory, shard.file)
    if not store.exists(path):
        raise ShardIntegrityError(f"shard {path} is missing; the version is damaged, re-publish it")
    digest = hashlib.sha256()
    size = 0
    with store.open(path, "rb") as handle:
        for chunk in _chunks(handle):
            digest.update(chunk)
            dest.write(chunk)
            size += len(chunk)
    if size != shard.bytes or digest.hexdigest() != shard.sha256:
        raise ShardIntegrityError(
            f"shard {path} is corrupt: sha256 {digest.hexdigest()[:16]}… ({size} bytes) but the "
            f"manifest recorded {shard.sha256[:16]}… ({shard.bytes} bytes)"
        )


def read_shard(store: Store, directory: str, shard: ShardInfo, columns: list[str] | None = None) -> pa.Table:
    return store.read_table(store.path(directory, shard.file), columns)
