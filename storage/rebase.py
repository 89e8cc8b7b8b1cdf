"""A table of every row the next version should hold, computed over a version that is no longer the
latest, moved onto the latest: the change it made stays, what the newer versions changed stays too.

A curation run reads the latest version ``v<base>`` (and the retractions), then publishes its table;
if meanwhile another run published its batch or ``ptf datasets retract`` took rows out (``v<onto>``),
publishing the table as it is would drop that batch or bring the rows back. :func:`rebase` takes the
run's change over ``v<base>`` — rows it put in or changed, ids it took out — and applies it to
``v<onto>``'s rows instead. The caller then filters the retractions read after ``v<onto>`` and
publishes over ``v<onto>`` (``DatasetStore.publish(base=...)``), which checks the base again.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.storage.changes import changes_since
from ptfactory.storage.schema import SAMPLE_SCHEMA, conform
from ptfactory.storage.shards import ShardInfo, read_shard, row_hashes
from ptfactory.storage.versions import DatasetStore

__all__ = ["change_over", "rebase"]


def _rows(datasets: DatasetStore, name: str, version: int) -> pa.Table:
    """Every row of ``v<version>``, all splits (none for version 0: no version)."""
    if not version:
        return SAMPLE_SCHEMA.empty_table()
    return conform(datasets.read(f"{name}@v{version}"))


def change_over(datasets: DatasetStore, name: str, table: pa.Table, base: int) -> tuple[pa.Table, list[str]]:
    """What ``table`` changes over ``v<base>``: the rows it lacks or holds otherwise (upserts), and
    the ids ``v<base>`` holds that ``table`` does not (removed)."""
    table = conform(table)
    if not base:
        return table, []
    parent = datasets.manifest(name, base)
    directory = datasets.version_dir(name, base)

    def read(shard: ShardInfo) -> pa.Table:
        return read_shard(datasets.store, directory, shard)

    found = changes_since(parent, table, read)  # row sums: reads only the ranges that differ
    if found is not None:
        return found.upserts, list(found.removed)
    old = _rows(datasets, name, base)
    ids = table.column("sample_id").to_pylist()
    removed = sorted(set(old.column("sample_id").to_pylist()) - set(ids))
    mine, theirs = row_hashes(table), row_hashes(old)
    if mine is None or theirs is None:  # rows polars cannot hash: compare them as Python values
        held = dict(zip(old.column("sample_id").to_pylist(), old.to_pylist(), strict=True))
        differs = [held.get(i) != row for i, row in zip(ids, table.to_pylist(), strict=True)]
    else:
        held_hash = dict(zip(old.column("sample_id").to_pylist(), [int(h) for h in theirs], strict=True))
        differs = [held_hash.get(i) != int(h) for i, h in zip(ids, mine, strict=True)]
    return table.filter(pa.array(differs, pa.bool_())), removed


def rebase(datasets: DatasetStore, name: str, table: pa.Table, *, base: int, onto: int) -> pa.Table:
    """``table`` (every row the next version should hold, computed over ``v<base>``; 0: none) as it
    would be computed over ``v<onto>``: ``v<onto>``'s rows with ``table``'s change applied. A row
    both changed goes in as ``table`` has it (the later publish wins that row, not the version)."""
    if onto == base:
        return conform(table)
    upserts, removed = change_over(datasets, name, table, base)
    latest = _rows(datasets, name, onto)
    gone = pa.array(sorted({*removed, *upserts.column("sample_id").to_pylist()}), pa.string())
    kept = latest.filter(pc.invert(pc.is_in(latest.column("sample_id"), value_set=gone)))
    return pa.concat_tables([kept, conform(upserts)])
