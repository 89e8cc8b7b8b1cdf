"""Parquet shards: deterministic zstd writing, sha256 on the way out, verification on the way in."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.errors import ShardIntegrityError
from ptfactory.storage.fs import Store

__all__ = [
    "PARQUET_OPTIONS",
    "ShardInfo",
    "copy_verified",
    "hash_file",
    "read_shard",
    "shard_name",
    "verify_shard",
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
        with store.atomic_writer(store.path(directory, name)) as handle:
            writer = _HashingWriter(handle)
            pq.write_table(part, writer, **PARQUET_OPTIONS)
        return ShardInfo(name, writer.digest.hexdigest(), part.num_rows, writer.written)

    if len(starts) == 1:
        return [write_one(0)]
    with ThreadPoolExecutor(max_workers=min(workers or os.cpu_count() or 1, len(starts))) as pool:
        return list(pool.map(write_one, range(len(starts))))


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
