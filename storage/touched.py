"""The buckets a change touches: found, merged, written (``DatasetStore.publish_delta``).

See ``storage.delta`` for the whole of a delta publish; this holds its bucket work: which buckets
of each split hold an upserted or removed id (``plan``), each one's new rows and shard (``apply``),
and the staged version assembled from them and the base's other shards.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.errors import PublishError
from ptfactory.storage.fs import Store
from ptfactory.storage.manifest import Manifest, schema_to_json
from ptfactory.storage.rowsums import RowSums
from ptfactory.storage.schema import SAMPLE_SCHEMA, conform
from ptfactory.storage.shards import (
    ShardInfo,
    bucket_count,
    bucket_fingerprint,
    bucket_index,
    bucket_of,
    read_shard,
    row_hashes,
    shard_name,
    write_part,
)
from ptfactory.storage.staging import Place, StagedDelta, StagedShards
from ptfactory.storage.stats import Totals

if TYPE_CHECKING:
    from ptfactory.storage.delta import DeltaRequest

__all__ = ["apply", "merged", "plan"]

_Array = np.ndarray[Any, np.dtype[Any]]


@dataclass(frozen=True)
class _Bucket:
    """One bucket the change touches: the base's shard (if any), which of its rows go, which upserts come."""

    split: str
    index: int
    file: str
    old: ShardInfo | None
    drop: pa.Array | None  # over the old shard's rows
    add: _Array  # positions in the split's upserts


@dataclass(frozen=True)
class _Change:
    """A touched bucket's rows taken out and put in, for the stats and the row sums."""

    removed: Totals
    added: Totals
    gone_ids: list[str]
    sums: tuple[_Array, _Array, _Array, _Array]  # gone keys, hashes; added keys, hashes


@dataclass(frozen=True)
class _Done:
    shard: ShardInfo | None  # None: the bucket is empty now
    ids: pa.Array | None  # sample ids of a written shard
    replaced: ShardInfo | None
    change: _Change


def _split_rows(parent: Manifest) -> dict[str, int]:
    by_file = {s.file: s.rows for s in parent.shards}
    return {split: sum(by_file[f] for f in files) for split, files in parent.splits.items()}


def plan(request: DeltaRequest, store: Store, parent: Manifest, parent_dir: str) -> list[_Bucket] | None:
    """The buckets the change touches; None when it must be published the full way (see module doc)."""
    if not parent.splits or any(s not in parent.splits for s in request.upserts):
        return None  # a split the base has not: every file of the layout may change
    if any(parent.buckets.get(s) is None for s in parent.splits) or parent.row_sums is None:
        return None  # a version from before buckets or row sums
    if any(s.fingerprint is None for s in parent.shards) or Totals.from_stats(parent.stats) is None:
        return None
    if parent.schema != schema_to_json(SAMPLE_SCHEMA):
        return None  # the schema moved on: every shard is rewritten
    single = list(parent.splits) == ["train"]
    touching = request.touching
    keys = bucket_of(touching)
    by_file = {s.file: s for s in parent.shards}
    before = _split_rows(parent)
    found: list[_Bucket] = []
    for split, files in parent.splits.items():
        buckets = parent.buckets[split]
        prefix = "part" if single else split
        upserts = request.upserts.get(split)
        of_upsert = bucket_index(upserts.column("sample_id"), buckets) if upserts is not None else None
        held = set(files)
        dropped = 0
        for index in np.unique(((keys * np.uint64(buckets)) >> np.uint64(32)).astype(np.int64)):
            file = shard_name(int(index), prefix)
            old = by_file[file] if file in held else None
            drop = None
            if old is not None:
                ids = read_shard(store, parent_dir, old, ["sample_id"]).column("sample_id")
                drop = pc.is_in(ids.combine_chunks(), value_set=touching)
                dropped += int(pc.sum(drop).as_py() or 0)
            add = np.flatnonzero(of_upsert == index) if of_upsert is not None else np.zeros(0, np.int64)
            if (drop is None or not pc.any(drop).as_py()) and not len(add):
                continue
            found.append(_Bucket(split, int(index), file, old, drop, add))
        after = before[split] - dropped + (upserts.num_rows if upserts is not None else 0)
        if after == 0 or bucket_count(after, request.shard_rows, buckets) != buckets:
            return None
    return found


def merged(request: DeltaRequest, store: Store, parent: Manifest, parent_dir: str) -> dict[str, pa.Table]:
    """The base's rows with the change applied, by split: for the full way. A split left empty is
    dropped; if all are, one empty ``train`` remains."""
    touching = request.touching
    by_file = {s.file: s for s in parent.shards}
    names = list(parent.splits) + [s for s in request.upserts if s not in parent.splits]
    merged: dict[str, pa.Table] = {}
    for split in names:
        parts = [conform(read_shard(store, parent_dir, by_file[f])) for f in parent.splits.get(split, [])]
        parts = [p.filter(pc.invert(pc.is_in(p.column("sample_id"), value_set=touching))) for p in parts]
        if split in request.upserts:
            parts.append(request.upserts[split])
        table = pa.concat_tables(parts) if parts else SAMPLE_SCHEMA.empty_table()
        if table.num_rows:
            merged[split] = table
    return merged or {"train": SAMPLE_SCHEMA.empty_table()}


def apply(
    request: DeltaRequest,
    *,
    store: Store,
    work: str,
    parent: Manifest,
    parent_dir: str,
    place: Place,
    plan: list[_Bucket],
    after_split: Callable[[str], None] | None,
) -> StagedShards:
    origin = {s.file: s.reused_from if s.reused_from is not None else parent.version for s in parent.shards}

    def reused(old: ShardInfo) -> ShardInfo:
        return ShardInfo(old.file, old.sha256, old.rows, old.bytes, old.fingerprint, origin[old.file])

    def one(bucket: _Bucket) -> _Done:
        buckets = parent.buckets[bucket.split]
        upserts = request.upserts.get(bucket.split, SAMPLE_SCHEMA.empty_table())
        added = upserts.take(pa.array(bucket.add, pa.int64()))
        rows = SAMPLE_SCHEMA.empty_table()
        if bucket.old is not None and bucket.drop is not None:
            rows = conform(read_shard(store, parent_dir, bucket.old))
        # one table of the old rows then the added ones, hashed once; the merged shard is a single
        # take of it (the kept old rows and the added ones, in sample_id order)
        both = pa.concat_tables([rows, added])
        hashed = row_hashes(both)
        if hashed is None:
            raise PublishError(f"{request.name}: rows polars cannot hash; publish the whole table instead")
        dropped = np.zeros(rows.num_rows, bool) if bucket.drop is None else np.asarray(bucket.drop, bool)
        keep = np.concatenate([np.flatnonzero(~dropped), np.arange(rows.num_rows, both.num_rows)])
        ids = both.column("sample_id").take(pa.array(keep, pa.int64()))
        order = keep[np.asarray(pc.sort_indices(ids), np.int64)]
        merged = both.take(pa.array(order, pa.int64()))
        hashes = hashed[order]
        gone_at = np.flatnonzero(dropped)
        gone = rows.take(pa.array(gone_at, pa.int64()))
        gone_hashes, added_hashes = hashed[gone_at], hashed[rows.num_rows :]
        change = _Change(
            removed=Totals.of(gone),
            added=Totals.of(added),
            gone_ids=gone.column("sample_id").to_pylist(),
            sums=(
                bucket_of(gone.column("sample_id")),
                gone_hashes,
                bucket_of(added.column("sample_id")),
                added_hashes,
            ),
        )
        if not merged.num_rows:
            return _Done(None, None, bucket.old, change)
        fingerprint = bucket_fingerprint(merged.schema, buckets, hashes)
        path = store.path(work, bucket.file)
        old = bucket.old
        if old is not None and (old.fingerprint, old.rows) == (fingerprint, merged.num_rows):
            place(old, path)  # the same rows after all (an upsert equal to the row it replaces)
            return _Done(reused(old), None, None, change)
        sha, size = write_part(merged, store, path)
        shard = ShardInfo(bucket.file, sha, merged.num_rows, size, fingerprint)
        return _Done(shard, merged.column("sample_id").combine_chunks(), old, change)

    touched = {(b.split, b.file) for b in plan}
    untouched = [
        (split, s)
        for split, files in parent.splits.items()
        for s in parent.shards
        if s.file in files and (split, s.file) not in touched
    ]
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(plan) + len(untouched)))) as pool:
        done = dict(zip(((b.split, b.file) for b in plan), pool.map(one, plan), strict=True))
        list(pool.map(lambda item: place(item[1], store.path(work, item[1].file)), untouched))
    return _staged(request, parent, done, after_split)


def _staged(
    request: DeltaRequest,
    parent: Manifest,
    done: dict[tuple[str, str], _Done],
    after_split: Callable[[str], None] | None,
) -> StagedShards:
    origin = {s.file: s.reused_from if s.reused_from is not None else parent.version for s in parent.shards}
    by_file = {s.file: s for s in parent.shards}
    single = list(parent.splits) == ["train"]
    shards: list[ShardInfo] = []
    split_files: dict[str, list[str]] = {}
    totals = Totals.from_stats(parent.stats) or Totals()
    sums = RowSums.from_json(parent.row_sums) or RowSums.empty(max(parent.buckets.values()))
    replaced: dict[str, ShardInfo | None] = {}
    ids: dict[str, pa.Array] = {}
    gone: set[str] = set()
    split_rows: dict[str, int] = {}
    for split, files in parent.splits.items():
        prefix = "part" if single else split
        listed: dict[int, ShardInfo] = {}
        for file in files:
            old = by_file[file]
            listed[int(file.removeprefix(f"{prefix}-").removesuffix(".parquet"))] = ShardInfo(
                old.file, old.sha256, old.rows, old.bytes, old.fingerprint, origin[file]
            )
        for (where, file), result in done.items():
            if where != split:
                continue
            index = int(file.removeprefix(f"{prefix}-").removesuffix(".parquet"))
            listed.pop(index, None)
            if result.shard is not None:
                listed[index] = result.shard
                if result.ids is not None:
                    ids[file] = result.ids
                    replaced[file] = result.replaced
            totals = totals - result.change.removed + result.change.added
            gone_keys, gone_hashes, added_keys, added_hashes = result.change.sums
            sums = sums.plus(gone_keys, gone_hashes, -1).plus(added_keys, added_hashes)
            gone.update(result.change.gone_ids)
        ordered = [listed[k] for k in sorted(listed)]
        shards.extend(ordered)
        split_files[split] = [s.file for s in ordered]
        split_rows[split] = sum(s.rows for s in ordered)
        if after_split is not None:
            after_split(split)
    upserted = {i for t in request.upserts.values() for i in t.column("sample_id").to_pylist()}
    removed = frozenset(gone - upserted)
    delta = StagedDelta(
        base=parent,
        changed=dict(request.upserts),
        removed=removed,
        replaced=replaced,
        added=len(upserted - gone),
        dropped=len(removed),
    )
    return StagedShards(
        shards,
        split_files,
        dict(parent.buckets),
        ids,
        rows=totals.rows,
        schema=SAMPLE_SCHEMA,
        stats=totals.render(split_rows),
        row_sums=sums,
        delta=delta,
    )
