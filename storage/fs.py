"""A thin layer over fsspec: one root URL, atomic writes, durable local renames.

Local paths get real atomicity (write to a temp name, fsync, ``os.replace``, fsync
the directory). Object stores have no rename: an object appears whole when its upload
completes, a failed upload is discarded (never completed by ``close()``), and a version
becomes visible only when its ``manifest.json`` is created, last (see storage.commit).
Listings on object stores are never served from fsspec's cache: another machine may have
written since.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.home import is_local_url

__all__ = ["Store", "atomic_write_text", "fsync_dir", "parquet_from_bytes"]


def fsync_dir(path: str | Path) -> None:
    """Make a rename or create inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: str | Path, text: str, mode: int = 0o644) -> None:
    """Replace a local file whole: readers see the old or the new text, never a part.

    The file is created with ``mode`` from the start (a secret is never briefly world-readable).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def parquet_from_bytes(data: bytes, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file held in memory, read from an Arrow buffer (never a Python file object)."""
    return pq.read_table(pa.BufferReader(data), columns=columns)


class Store:
    """Files under one root, which may be a local path or any fsspec URL."""

    def __init__(self, root: str) -> None:
        self.local = is_local_url(root)
        if self.local:
            self.root = str(Path(root.removeprefix("file://")).resolve())
            self.fs: Any = fsspec.filesystem("file")
        else:
            self.fs, _ = fsspec.core.url_to_fs(root)
            self.root = root.rstrip("/")

    def __repr__(self) -> str:
        return f"Store({self.root!r})"

    @property
    def protocols(self) -> tuple[str, ...]:
        """The fsspec protocol names of the store (``("s3", "s3a")``, ``("memory",)``, ...)."""
        protocol = self.fs.protocol
        return (protocol,) if isinstance(protocol, str) else tuple(protocol)

    def path(self, *parts: str) -> str:
        """A path under the root; a first part that is already a full path (a URL, or absolute) is kept."""
        if not parts:
            return self.root
        if "://" in parts[0]:
            return posixpath.join(*parts)
        return posixpath.join(self.root, *parts)

    def fresh(self, path: str) -> None:
        """Forget what fsspec cached about ``path``: on a shared store another writer may have changed it."""
        if not self.local:
            self.fs.invalidate_cache(path)

    def exists(self, path: str) -> bool:
        self.fresh(path)
        return bool(self.fs.exists(path))

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        """Base names of the entries in ``path``; empty if it does not exist."""
        if not self.exists(path):
            return []
        return sorted(posixpath.basename(p.rstrip("/")) for p in self.fs.ls(path, detail=False))

    def find(self, path: str) -> list[str]:
        """Every file below ``path``, relative to it; on object stores one recursive listing, fresh."""
        self.fresh(path)
        if not self.fs.exists(path):
            return []
        root = self.fs._strip_protocol(path).rstrip("/") + "/"
        return sorted(p[len(root) :] for p in self.fs.find(path) if p.startswith(root))

    def open(self, path: str, mode: str = "rb") -> IO[Any]:
        return self.fs.open(path, mode)  # type: ignore[no-any-return]

    def read_table(self, path: str, columns: list[str] | None = None) -> pa.Table:
        """One Parquet file, read without handing Arrow a Python file object.

        Arrow's I/O threads read a Python file by calling back into Python; one still waiting for
        the GIL when the interpreter exits is killed mid-C++ and aborts the process ("terminate
        called without an active exception") after the command's work is done. Local files are
        read natively; remote ones are fetched whole first (asset and shard files are bounded).
        """
        if self.local:
            return pq.read_table(path, columns=columns)
        return parquet_from_bytes(self.read_bytes(path), columns)

    def read_bytes(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def size(self, path: str) -> int:
        return int(self.fs.size(path))

    def remove(self, path: str, recursive: bool = False) -> None:
        if self.exists(path):
            self.fs.rm(path, recursive=recursive)

    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        """Readers see the old file or the whole new one, never a part."""
        with self.atomic_writer(path) as handle:
            handle.write(data)

    @contextmanager
    def atomic_writer(self, path: str, durable: bool = True) -> Iterator[IO[bytes]]:
        """Open ``path`` for writing; it appears whole on success and not at all on error.

        ``durable`` also fsyncs, so the file survives a power loss, not just a crash; copies that
        are verified on every read (pulled versions) can skip that.
        """
        parent = posixpath.dirname(path)
        self.makedirs(parent)
        if not self.local:
            yield from self._object_writer(path)
            return
        tmp = posixpath.join(parent, f".tmp-{uuid.uuid4().hex}-{posixpath.basename(path)}")
        try:
            with open(tmp, "wb") as handle:
                yield handle
                if durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(tmp, path)
            if durable:
                fsync_dir(parent)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _object_writer(self, path: str) -> Iterator[IO[bytes]]:
        # An object appears when its upload completes, whole. A file object's close() completes the
        # upload, so on an error the upload is discarded instead (an abandoned multipart upload is
        # aborted), never closed: a failed write leaves the old object or none, never a part.
        handle = self.fs.open(path, "wb")
        try:
            yield handle
        except BaseException:
            discard = getattr(handle, "discard", None)
            if callable(discard):
                discard()
            if "memory" in self.protocols:
                self.fs.rm_file(path)  # memory:// files exist from open() on
            raise
        handle.close()

    def rename_dir(self, src: str, dst: str) -> None:
        """Atomically move a directory into place; fails if ``dst`` exists (local only)."""
        if not self.local:
            raise NotImplementedError("directory renames are only atomic on local file systems")
        os.rename(src, dst)  # POSIX: fails with ENOTEMPTY/EEXIST rather than replacing a version
        fsync_dir(posixpath.dirname(dst))
