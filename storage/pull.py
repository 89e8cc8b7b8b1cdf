"""``ptf pull``: copy a version out of the factory, exactly, verifying every shard's sha256 on the way.

The target ends holding the version's files and nothing else, so a glob reader
(``DIR/*.parquet``) trains on exactly those rows: a non-empty target is refused unless
``force`` (and then only an earlier pull is replaced). ``ptf_pull.json`` (the receipt) records the
version, the sha256 of its manifest, the columns and each pulled file's checksum; with ``columns``
the shards are projections, whose checksums only the receipt holds.

Shard names repeat across versions (``part-00000.parquet``), so a version is never copied into the
target's place: it is pulled whole into a staging folder beside it (same file system), verified,
and swapped in with one atomic exchange of the two folders (``renameat2(RENAME_EXCHANGE)``). Whatever
fails or is killed, the target holds the old pull untouched or the new one whole, never a mix;
what a killed pull leaves beside it (``.<name>.ptf-pull-*``) the next pull of that target removes.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import errno
import hashlib
import io
import json
import os
import posixpath
import shutil
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from filelock import FileLock

from ptfactory.errors import ShardIntegrityError, UserInputError
from ptfactory.storage.fs import Store, parquet_from_bytes
from ptfactory.storage.manifest import MANIFEST_FILE, Manifest
from ptfactory.storage.seams import seam
from ptfactory.storage.shards import PARQUET_OPTIONS, ShardInfo, copy_verified
from ptfactory.storage.versions import DatasetStore

__all__ = ["RECEIPT_FILE", "PullReceipt", "pull"]

RECEIPT_FILE = "ptf_pull.json"
_CARD = "README.md"


@dataclass(frozen=True)
class PullReceipt:
    manifest: Manifest
    manifest_sha256: str
    columns: list[str] | None
    files: list[ShardInfo]  # what was written: the shards, or their projections

    def to_json(self) -> str:
        body: dict[str, Any] = {
            "ref": self.manifest.ref,
            "dataset": self.manifest.name,
            "version": self.manifest.version,
            "manifest_sha256": self.manifest_sha256,
            "columns": self.columns,
            "shards": [s.to_dict() for s in self.files],
            "pulled_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


def _check_target(to: Path, manifest: Manifest, force: bool) -> None:
    if to.exists() and not to.is_dir():
        raise UserInputError(f"--to {to} is a file; pass a folder")
    present = sorted(p.name for p in to.iterdir()) if to.is_dir() else []
    if not present:
        return
    if not force:
        shown = ", ".join(present[:3]) + (", ..." if len(present) > 3 else "")
        raise UserInputError(
            f"--to {to} is not empty ({len(present)} entries: {shown}); pull into an empty folder, or "
            f"pass --force to make it hold exactly {manifest.ref} (what its manifest does not list is removed)"
        )
    if not {RECEIPT_FILE, MANIFEST_FILE} & set(present):
        # --force removes files: only in a folder that holds an earlier pull, never in someone's data
        raise UserInputError(
            f"--to {to} holds files that are not a pulled version (no {RECEIPT_FILE} or {MANIFEST_FILE}); "
            "--force replaces only an earlier pull: pick an empty folder"
        )


def _projected(data: bytes, columns: list[str]) -> bytes:
    table = parquet_from_bytes(data, columns)
    sink = io.BytesIO()
    pq.write_table(table, sink, **PARQUET_OPTIONS)
    return sink.getvalue()


def pull(
    datasets: DatasetStore, ref: str, to: Path, *, force: bool = False, columns: list[str] | None = None
) -> PullReceipt:
    """Make ``to`` hold exactly the version ``ref`` names; raise :class:`ShardIntegrityError` naming a
    bad shard. The version is staged beside ``to`` and swapped in whole: on any failure (or a kill)
    ``to`` still holds what it held."""
    manifest = datasets.resolve(ref)
    if columns is not None:
        allowed = [str(f["name"]) for f in manifest.schema]
        unknown = [c for c in columns if c not in allowed]
        if not columns or unknown:
            raise UserInputError(
                f"--columns: {unknown[0] if unknown else '(none)'!r} is not a column of {manifest.ref}; "
                f"columns: {', '.join(allowed)}"
            )
    to = to.resolve()  # a symlink to a folder: the folder it names is the one replaced
    _check_target(to, manifest, force)
    to.parent.mkdir(parents=True, exist_ok=True)
    # one pull of a target at a time: the lock makes its leftovers a dead pull's, never a live one's
    with FileLock(str(to.parent / f".{to.name}.ptf-pull.lock")):
        _clean_leftovers(to)
        _check_target(to, manifest, force)
        staging = to.parent / f"{_staging_prefix(to)}{uuid.uuid4().hex[:12]}"
        staging.mkdir()
        if to.is_dir():
            os.chmod(staging, to.stat().st_mode & 0o7777)  # the folder keeps its permissions
        try:
            receipt = _fill(datasets, manifest, staging, columns)
            seam("pull:staged")
            _swap(staging, to)
            seam("pull:swapped")
        finally:
            # before the swap: the unfinished pull; after it: the earlier pull it replaced
            shutil.rmtree(staging, ignore_errors=True)
    return receipt


def _staging_prefix(to: Path) -> str:
    return f".{to.name}.ptf-pull-"


def _clean_leftovers(to: Path) -> None:
    """Remove what killed pulls of ``to`` left beside it (only called under the target's lock); an
    earlier pull that a pull killed mid-swap had moved aside goes back in place first."""
    if not to.exists():
        for aside in sorted(to.parent.glob(f"{_staging_prefix(to)}old-*")):
            os.rename(aside, to)
            break
    for entry in to.parent.glob(f"{_staging_prefix(to)}*"):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _fill(datasets: DatasetStore, manifest: Manifest, folder: Path, columns: list[str] | None) -> PullReceipt:
    """Copy and verify the version into the empty ``folder``, with its card, manifest and receipt."""
    source = datasets.version_dir(manifest.name, manifest.version)
    local = Store(str(folder))
    copied = 0
    counting = threading.Lock()

    def copy_one(shard: ShardInfo) -> ShardInfo:
        nonlocal copied
        # Not fsynced: a pulled copy is verified again whenever it is read through storage
        target = str(folder / shard.file)
        if columns is None:
            with local.atomic_writer(target, durable=False) as handle:
                copy_verified(datasets.store, source, shard, handle)
            written = shard
        else:
            buffer = io.BytesIO()
            copy_verified(datasets.store, source, shard, buffer)
            data = _projected(buffer.getvalue(), columns)
            local.write_bytes_atomic(target, data)
            written = ShardInfo(
                file=shard.file, sha256=hashlib.sha256(data).hexdigest(), rows=shard.rows, bytes=len(data)
            )
        with counting:
            copied += 1
            done = copied
        seam(f"pull:copied:{done}")
        return written

    # Hashing releases the GIL, so shards copy and verify in parallel.
    with ThreadPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1, len(manifest.shards)))) as pool:
        futures = [pool.submit(copy_one, s) for s in manifest.shards]
        try:
            written = [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    manifest_bytes = datasets.store.read_bytes(posixpath.join(source, MANIFEST_FILE))
    local.write_bytes_atomic(str(folder / _CARD), datasets.store.read_bytes(posixpath.join(source, _CARD)))
    local.write_bytes_atomic(str(folder / MANIFEST_FILE), manifest_bytes)
    receipt = PullReceipt(manifest, hashlib.sha256(manifest_bytes).hexdigest(), columns, written)
    local.write_bytes_atomic(str(folder / RECEIPT_FILE), receipt.to_json().encode("utf-8"))
    expected = {s.file for s in manifest.shards} | {_CARD, MANIFEST_FILE, RECEIPT_FILE}
    held = {p.name for p in folder.iterdir()}
    if held != expected:
        raise ShardIntegrityError(f"the pull of {manifest.ref} staged {sorted(held ^ expected)}; pull again")
    return receipt


_RENAME_EXCHANGE = 2  # linux/fs.h


def _swap(staging: Path, to: Path) -> None:
    """Put ``staging`` where ``to`` is, in one step: a rename onto a missing or empty folder, else an
    atomic exchange of the two folders (``staging`` then holds the earlier pull, for the caller to
    remove). Where the kernel or file system cannot exchange, two renames, the earlier pull kept
    beside until the new one is in place."""
    try:
        os.rename(staging, to)  # `to` missing, or an empty folder (replaced)
        return
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    if _exchange(staging, to):
        return
    # no exchange here: the earlier pull steps aside, under a leftover's name, then the new one goes in
    aside = to.parent / f"{_staging_prefix(to)}old-{uuid.uuid4().hex[:12]}"
    os.rename(to, aside)
    try:
        os.rename(staging, to)
    except BaseException:
        os.rename(aside, to)
        raise
    os.rename(aside, staging)  # the caller removes it


def _exchange(a: Path, b: Path) -> bool:
    """``renameat2(a, b, RENAME_EXCHANGE)``: True if done, False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, f"cannot swap {a} into {b}: {os.strerror(code)}")
