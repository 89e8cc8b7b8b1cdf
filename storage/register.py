"""What a published version adds to the catalog, and how it differs from its parent in rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.errors import PublishError
from ptfactory.storage.fs import Store
from ptfactory.storage.manifest import Manifest
from ptfactory.storage.shards import read_shard
from ptfactory.storage.staging import StagedShards

__all__ = ["rows_added_removed", "sample_index"]

_EMPTY_INDEX = pa.table(
    {
        "sample_id": pa.array([], pa.string()),
        "shard": pa.array([], pa.string()),
        "row": pa.array([], pa.int64()),
    }
)


def rows_added_removed(
    store: Store, parent: Manifest | None, staged: StagedShards, directory: str | None
) -> tuple[int, int]:
    """Rows added and removed against ``parent`` (in ``directory``). A delta publish counted them
    while staging; a shard reused from the parent holds the same ids, and an id always falls in the
    same bucket, so otherwise only the shards rewritten (or gone) are compared."""
    if parent is None or directory is None:
        return staged.rows, 0
    if staged.delta is not None:
        if staged.delta.base.version != parent.version:
            raise PublishError(
                f"{parent.name}: a change over v{staged.delta.base.version} cannot be committed over "
                f"v{parent.version}"
            )
        return staged.delta.added, staged.delta.dropped
    ids = staged.all_ids
    if ids is None:
        raise PublishError(f"{parent.name}: the staged version lost its ids; publish again")
    old_shards = {s.file: s for s in parent.shards}
    if parent.buckets == staged.buckets:
        reused = {s.file for s in staged.shards if s.reused_from is not None}
        if all(
            s.file in old_shards and old_shards[s.file].sha256 == s.sha256
            for s in staged.shards
            if s.file in reused
        ):
            old_shards = {f: s for f, s in old_shards.items() if f not in reused}
            ids = pa.chunked_array(list(staged.ids.values()), pa.string())
    parts = [read_shard(store, directory, shard, ["sample_id"]) for shard in old_shards.values()]
    old = pa.chunked_array([p.column("sample_id").combine_chunks() for p in parts], pa.string())
    added = int(pc.sum(pc.invert(pc.is_in(ids, value_set=old.combine_chunks()))).as_py() or 0)
    removed = int(pc.sum(pc.invert(pc.is_in(old, value_set=ids.combine_chunks()))).as_py() or 0)
    return added, removed


def sample_index(
    store: Store, manifest: Manifest, path: str, staged: StagedShards | None = None
) -> tuple[pa.Table, list[tuple[str, int]]]:
    """Catalog rows for a version: a sample row per row of each shard it wrote (``staged.ids``
    saves reading them back), and a reference for each shard reused from an earlier version."""
    parts = []
    refs: list[tuple[str, int]] = []
    for shard in manifest.shards:
        if shard.reused_from is not None:
            refs.append((shard.file, shard.reused_from))
            continue
        column = staged.ids.get(shard.file) if staged is not None else None
        if column is None:
            column = read_shard(store, path, shard, ["sample_id"]).column("sample_id")
        parts.append(
            pa.table(
                {
                    "sample_id": column,
                    "shard": pa.repeat(pa.scalar(shard.file, pa.string()), shard.rows),
                    "row": pa.array(np.arange(shard.rows, dtype=np.int64)),
                }
            )
        )
    return (pa.concat_tables(parts) if parts else _EMPTY_INDEX), refs
