"""``ptf pull``: copy a version out of the factory, exactly, verifying every shard's sha256 on the way.

The target ends holding the version's files and nothing else, so a glob reader
(``DIR/*.parquet``) trains on exactly those rows: a non-empty target is refused unless
``force``, and then what the manifest does not list is removed. ``ptf_pull.json`` (the
receipt) records the version, the sha256 of its manifest, the columns and each pulled file's
checksum; with ``columns`` the shards are projections, whose checksums only the receipt holds.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import posixpath
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ptfactory.errors import ShardIntegrityError, UserInputError
from ptfactory.storage.fs import Store, parquet_from_bytes
from ptfactory.storage.manifest import MANIFEST_FILE, Manifest
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
    bad shard. Each file appears whole or not at all; a shard that fails verification is not left."""
    manifest = datasets.resolve(ref)
    if columns is not None:
        allowed = [str(f["name"]) for f in manifest.schema]
        unknown = [c for c in columns if c not in allowed]
        if not columns or unknown:
            raise UserInputError(
                f"--columns: {unknown[0] if unknown else '(none)'!r} is not a column of {manifest.ref}; "
                f"columns: {', '.join(allowed)}"
            )
    _check_target(to, manifest, force)
    source = datasets.version_dir(manifest.name, manifest.version)
    to.mkdir(parents=True, exist_ok=True)
    local = Store(str(to))

    def copy_one(shard: ShardInfo) -> ShardInfo:
        # Not fsynced: a pulled copy is verified again whenever it is read through storage, and
        # the temp-name + rename still means a killed pull never leaves a half shard in place.
        target = str(to / shard.file)
        try:
            if columns is None:
                with local.atomic_writer(target, durable=False) as handle:
                    copy_verified(datasets.store, source, shard, handle)
                return shard
            buffer = io.BytesIO()
            copy_verified(datasets.store, source, shard, buffer)
            data = _projected(buffer.getvalue(), columns)
            local.write_bytes_atomic(target, data)
            return ShardInfo(
                file=shard.file, sha256=hashlib.sha256(data).hexdigest(), rows=shard.rows, bytes=len(data)
            )
        except ShardIntegrityError:
            (to / shard.file).unlink(missing_ok=True)
            raise

    before = {p.name for p in to.iterdir()}
    # Hashing releases the GIL, so shards copy and verify in parallel.
    with ThreadPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1, len(manifest.shards)))) as pool:
        futures = [pool.submit(copy_one, s) for s in manifest.shards]
        try:
            written = [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            pool.shutdown(wait=True)
            # what this pull added goes again, so the folder is as it was (a retry is not refused)
            for entry in to.iterdir():
                if entry.name not in before and entry.is_file():
                    entry.unlink()
            raise
    manifest_bytes = datasets.store.read_bytes(posixpath.join(source, MANIFEST_FILE))
    local.write_bytes_atomic(str(to / _CARD), datasets.store.read_bytes(posixpath.join(source, _CARD)))
    local.write_bytes_atomic(str(to / MANIFEST_FILE), manifest_bytes)
    receipt = PullReceipt(manifest, hashlib.sha256(manifest_bytes).hexdigest(), columns, written)
    expected = {s.file for s in manifest.shards} | {_CARD, MANIFEST_FILE, RECEIPT_FILE}
    for entry in to.iterdir():  # what an earlier pull left (shards of another version, ...)
        if entry.name not in expected:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    local.write_bytes_atomic(str(to / RECEIPT_FILE), receipt.to_json().encode("utf-8"))
    held = {p.name for p in to.iterdir()}
    if held != expected:
        raise ShardIntegrityError(
            f"{to} holds {sorted(held ^ expected)} after the pull; pull again with --force"
        )
    return receipt
