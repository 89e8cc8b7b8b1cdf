"""Which rows of a table differ from a published version, without reading the version.

A caller that holds the whole next table (the dataset asset, after curation) hashes its rows, sums
the hashes per id range (``storage.rowsums``) and compares with the sums the version recorded: only
the ranges that differ are read from the version (one shard per split each), and compared row by
row. The result is the change to hand ``DatasetStore.publish_delta``: the rows that are new or
differ, and the ids that are gone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.storage.manifest import Manifest
from ptfactory.storage.rowsums import RowSums, range_of
from ptfactory.storage.schema import conform
from ptfactory.storage.shards import ShardInfo, bucket_of, row_hashes

__all__ = ["Changes", "changes_since"]


@dataclass(frozen=True)
class Changes:
    upserts: pa.Table  # rows of the table that the version lacks or holds with other content
    removed: list[str]  # ids the version holds that the table lacks
    sides: dict[str, str]  # id of an upserted row the version holds -> its split there
    read_rows: int  # rows of the version read to find them

    def __bool__(self) -> bool:
        return bool(self.upserts.num_rows or self.removed)


def changes_since(parent: Manifest, table: pa.Table, read: Callable[[ShardInfo], pa.Table]) -> Changes | None:
    """The change from ``parent`` to ``table`` (whole rows; ids unique); None when the version has
    no row sums (published before them) or the rows cannot be hashed: compare the full way then."""
    sums = RowSums.from_json(parent.row_sums)
    table = conform(table)
    hashes = row_hashes(table)
    if sums is None or hashes is None or not parent.buckets:
        return None
    keys = bucket_of(table.column("sample_id"))
    dirty = RowSums.of(sums.ranges, keys, hashes).differing(sums)
    if not len(dirty):
        return Changes(table.slice(0, 0), [], {}, 0)
    near = np.isin(range_of(keys, sums.ranges), dirty)
    candidates, candidate_hashes = table.filter(pa.array(near)), hashes[near]
    by_file = {s.file: s for s in parent.shards}
    held: dict[str, tuple[int, str]] = {}  # id -> (row hash, split) of the version's rows in the dirty ranges
    read_rows = 0
    for split, files in parent.splits.items():
        count = parent.buckets[split]
        wanted = {int(r) * count // sums.ranges for r in dirty}
        prefix = files[0].rsplit("-", 1)[0] if files else split
        for index in sorted(wanted):
            shard = by_file.get(f"{prefix}-{index:05d}.parquet")
            if shard is None or shard.file not in files:
                continue
            rows = conform(read(shard))
            read_rows += rows.num_rows
            ids = rows.column("sample_id")
            inside = np.isin(range_of(bucket_of(ids), sums.ranges), dirty)
            rows = rows.filter(pa.array(inside))
            found = row_hashes(rows)
            if found is None:
                return None
            for sid, value in zip(rows.column("sample_id").to_pylist(), list(found), strict=True):
                held[sid] = (int(value), split)
    ids = candidates.column("sample_id").to_pylist()
    differs = [
        held.get(sid, (None, ""))[0] != int(h) for sid, h in zip(ids, list(candidate_hashes), strict=True)
    ]
    upserts = candidates.filter(pa.array(differs, pa.bool_()))
    present = set(ids)
    removed = sorted(sid for sid in held if sid not in present)
    sides = {sid: held[sid][1] for sid in upserts.column("sample_id").to_pylist() if sid in held}
    return Changes(upserts, removed, sides, read_rows)


def take_ids(table: pa.Table, ids: list[str]) -> pa.Table:
    """The rows of ``table`` whose ``sample_id`` is in ``ids``."""
    return table.filter(pc.is_in(table.column("sample_id"), value_set=pa.array(ids, pa.string())))
