"""The change a curation run makes to a published dataset, so publishing costs the change.

The dataset asset holds every curated row, but after a new label only a few differ from the latest
version. :func:`plan_change` finds them (``storage.changes``: row-hash sums per id range, then the
few differing ranges compared row by row), gives each changed row its side of the split (its own
cluster key, as ``split_table`` does), and mends the split for what changed only: a held-out row
that is a near duplicate of a train row moves to train, looked up in the band keys kept per shard
(``filters.dedup.leak_keys``) instead of hashing every row. Rows that did not change keep the side
they have in the latest version. The result goes to ``DatasetStore.publish_delta``.

A version published before row sums, a different config (split fraction, dedup settings), or a
dataset held in one split while rows could be held out: ``None``, and the asset publishes the whole
table as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.filters.dedup.core import DedupConfig
from ptfactory.filters.dedup.leak_keys import TEXT_COLUMNS, KeyCache, Keys, Side, probe_leaks, version_sides
from ptfactory.storage.changes import Changes, changes_since, take_ids
from ptfactory.storage.manifest import Manifest
from ptfactory.storage.schema import SAMPLE_SCHEMA, conform
from ptfactory.storage.shards import ShardInfo, bucket_files, read_shard
from ptfactory.storage.split import held_out
from ptfactory.storage.versions import DatasetStore

__all__ = ["Change", "plan_change"]

_ROUNDS = 50


@dataclass(frozen=True)
class Change:
    upserts: dict[str, pa.Table]  # split -> rows put in
    removed: list[str]
    moved: int  # held-out rows moved to train because they near-duplicate a train row
    read_rows: int  # rows of the latest version read to find the change

    @property
    def rows(self) -> pa.Table:
        tables = [t for t in self.upserts.values() if t.num_rows]
        return pa.concat_tables(tables) if tables else SAMPLE_SCHEMA.empty_table()

    def __bool__(self) -> bool:
        return bool(self.removed) or any(t.num_rows for t in self.upserts.values())


def plan_change(
    datasets: DatasetStore,
    parent: Manifest,
    table: pa.Table,
    *,
    config_hash: str,
    fraction: float,
    dedup: DedupConfig,
    cache: KeyCache,
) -> Change | None:
    """The change from ``parent`` to ``table`` (every row the next version should hold), split and
    mended; None when it must be published the full way (see the module doc)."""
    splits = list(parent.splits)
    if parent.config_hash != config_hash or splits not in (["train", "validation"], ["train"]):
        return None
    if splits == ["train"] and fraction > 0:
        return None  # too few rows to hold any out last time: the full split decides again
    directory = datasets.version_dir(parent.name, parent.version)

    def read(shard: ShardInfo) -> pa.Table:
        return read_shard(datasets.store, directory, shard)

    changes = changes_since(parent, table, read)
    if changes is None:
        return None
    if not changes:
        return Change({s: SAMPLE_SCHEMA.empty_table() for s in splits}, [], 0, changes.read_rows)
    rows = changes.upserts
    if splits == ["train"]:
        return Change({"train": rows}, changes.removed, 0, changes.read_rows)
    mask = held_out(rows, fraction)
    upserts = {"train": rows.filter(pc.invert(mask)), "validation": rows.filter(mask)}
    upserts, moved = _mend(datasets, parent, upserts=upserts, changes=changes, dedup=dedup, cache=cache)
    return Change(upserts, changes.removed, moved, changes.read_rows)


def _mend(
    datasets: DatasetStore,
    parent: Manifest,
    *,
    upserts: dict[str, pa.Table],
    changes: Changes,
    dedup: DedupConfig,
    cache: KeyCache,
) -> tuple[dict[str, pa.Table], int]:
    """Move held-out rows that near-duplicate a train row to train, looking only at what changed: a
    changed row against the other side, then each moved row against the held-out side, until none
    moves (two unchanged rows did not leak in the latest version, which passed the leak check)."""
    directory = datasets.version_dir(parent.name, parent.version)
    shards = {split: [s for s in parent.shards if s.file in files] for split, files in parent.splits.items()}
    exclude = pa.array([*changes.upserts.column("sample_id").to_pylist(), *changes.removed], pa.string())

    def read(file: str, columns: list[str] | None = None) -> pa.Table:
        return datasets.store.read_table(datasets.store.path(directory, file), columns)

    built: dict[str, Side] = {}

    def side(split: str) -> Side:
        if split not in built:
            (found,) = version_sides({split: shards[split]}, parent.buckets, read, cache, exclude=exclude)
            built[split] = found
        return built[split]

    train, validation = upserts["train"], upserts["validation"]
    probes = {"train": train, "validation": validation}
    taken: list[str] = []  # unchanged held-out rows moved to train
    moved = 0
    for _ in range(_ROUNDS):
        mine = [_rows_side(train, False, dedup), _rows_side(validation, True, dedup)]
        leaks = []
        if probes["validation"].num_rows:
            leaks += probe_leaks(probes["validation"], True, [side("train"), *mine], dedup)
        if probes["train"].num_rows:
            held = side("validation")
            held = Side(True, held.keys.without(pa.array(taken, pa.string())), held.texts)
            leaks += probe_leaks(probes["train"], False, [held, *mine], dedup)
        ids = sorted({leak.validation_id for leak in leaks})
        if not ids:
            break
        from_changed = take_ids(validation, ids)
        from_version = _parent_rows(
            [i for i in ids if i not in set(from_changed.column("sample_id").to_pylist())],
            shards["validation"],
            parent.buckets["validation"],
            read,
        )
        taken += from_version.column("sample_id").to_pylist()
        going = pa.concat_tables([from_changed, from_version])
        validation = validation.filter(
            pc.invert(pc.is_in(validation.column("sample_id"), value_set=pa.array(ids)))
        )
        train = pa.concat_tables([train, going])
        probes = {"train": going, "validation": validation.slice(0, 0)}
        moved += going.num_rows
    return {"train": train, "validation": validation}, moved


def _rows_side(rows: pa.Table, held: bool, dedup: DedupConfig) -> Side:
    def texts(ids: list[str]) -> pa.Table:
        return take_ids(rows, ids).select(TEXT_COLUMNS)

    return Side(held, Keys.compute(rows, dedup), texts)


def _parent_rows(
    ids: list[str], shards: list[ShardInfo], buckets: int, read: Callable[..., pa.Table]
) -> pa.Table:
    """Whole rows of the latest version's held-out split, by id (only their buckets are read)."""
    if not ids:
        return SAMPLE_SCHEMA.empty_table()
    wanted = pa.array(ids, pa.string())
    files = bucket_files(wanted, [s.file for s in shards], buckets)
    parts = [take_ids(conform(read(f)), ids) for f in files]
    return pa.concat_tables(parts) if parts else SAMPLE_SCHEMA.empty_table()
