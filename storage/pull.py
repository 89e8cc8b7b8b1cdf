"""``ptf pull``: copy a version out of the factory, verifying every shard's sha256 on the way."""

from __future__ import annotations

import os
import posixpath
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ptfactory.errors import ShardIntegrityError
from ptfactory.storage.fs import Store
from ptfactory.storage.manifest import MANIFEST_FILE, Manifest
from ptfactory.storage.shards import ShardInfo, copy_verified
from ptfactory.storage.versions import DatasetStore

__all__ = ["pull"]


def pull(datasets: DatasetStore, ref: str, to: Path) -> Manifest:
    """Copy the version ``ref`` names into ``to``; raise :class:`ShardIntegrityError` naming a bad shard.

    Each file appears whole or not at all; a shard that fails verification is not left behind.
    """
    manifest = datasets.resolve(ref)
    source = datasets.version_dir(manifest.name, manifest.version)
    to.mkdir(parents=True, exist_ok=True)
    local = Store(str(to))

    def copy_one(shard: ShardInfo) -> None:
        # Not fsynced: a pulled copy is verified again whenever it is read through storage, and
        # the temp-name + rename still means a killed pull never leaves a half shard in place.
        try:
            with local.atomic_writer(str(to / shard.file), durable=False) as handle:
                copy_verified(datasets.store, source, shard, handle)
        except ShardIntegrityError:
            (to / shard.file).unlink(missing_ok=True)
            raise

    # Hashing releases the GIL, so shards copy and verify in parallel.
    with ThreadPoolExecutor(max_workers=min(os.cpu_count() or 1, len(manifest.shards))) as pool:
        for future in [pool.submit(copy_one, shard) for shard in manifest.shards]:
            future.result()
    for name in ("README.md", MANIFEST_FILE):
        data = datasets.store.read_bytes(posixpath.join(source, name))
        local.write_bytes_atomic(str(to / name), data)
    return manifest
