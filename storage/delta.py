"""Publishing a change over a version (``DatasetStore.publish_delta``): the work is the change's.

A new label changes a few rows of a large version. Handed the whole table, a publish validates,
sorts and hashes every row; handed the change — rows put in (``upserts``, by split) and ids taken
out (``removed``) — it works on the buckets the change falls in, since a sample id always falls
in the same bucket (``storage.shards.bucket_index``):

1. each split's buckets holding an upserted or removed id have their ids read (one column);
2. a bucket that loses or gains rows is read, merged (its rows minus the changed ids, plus the
   upserts that fall in it), sorted by ``sample_id``, hashed and written — or reused, as a full
   publish would, when its fingerprint equals the base's;
3. every other bucket is the base's shard, reused (hard link / server-side copy);
4. the stats (:class:`~ptfactory.storage.stats.Totals`), row sums and rows added/removed are the
   base's, corrected by the rows taken out and put in.

The version is exactly the one a full publish of the merged table makes: same shards, bytes,
sha256, manifest stats (tests/storage/test_delta.py). A change that adds a split, empties one,
or moves a split's bucket count out of its dead band reads the base whole and publishes the
merged table the full way: rare, and the same result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ptfactory.errors import PublishError
from ptfactory.storage.audit import Audit
from ptfactory.storage.fs import Store
from ptfactory.storage.manifest import Manifest
from ptfactory.storage.refs import check_name
from ptfactory.storage.schema import SAMPLE_SCHEMA, conform, validate_table
from ptfactory.storage.staging import BaseMoved, Place, PublishRequest, StagedShards, Stats, check_base
from ptfactory.storage.touched import apply, merged, plan

__all__ = ["BaseMoved", "DeltaRequest"]


@dataclass(frozen=True)
class DeltaRequest:
    """A validated change: the rows put in by split, the ids taken out, and what the manifest records."""

    name: str
    upserts: dict[str, pa.Table]
    removed: frozenset[str]
    base: int | None  # the version the change was computed over (0: none; None: whatever is latest)
    kind: str
    config_hash: str
    shard_rows: int
    dagster_run_id: str | None
    batches: list[str] | None  # None: the batches of the version's rows
    stats: Stats
    force: bool
    audit: Audit | None
    retraction: dict[str, Any] | None

    @classmethod
    def prepare(
        cls,
        name: str,
        upserts: pa.Table | Mapping[str, pa.Table],
        removed: Iterable[str],
        *,
        base: int | None,
        kind: str,
        config_hash: str,
        shard_rows: int,
        dagster_run_id: str | None,
        batches: list[str] | None,
        stats: Stats | None,
        force: bool,
        audit: Audit | None,
        retraction: Mapping[str, Any] | None,
    ) -> DeltaRequest:
        check_name(name)
        if shard_rows <= 0:
            raise ValueError(f"shard_rows must be positive, got {shard_rows}")
        named = {"train": upserts} if isinstance(upserts, pa.Table) else dict(upserts)
        tables = {}
        for split, given in named.items():
            table = conform(given)
            validate_table(table)
            if table.num_rows:  # an empty split in a change changes nothing
                tables[split] = table
        ids = [i for t in tables.values() for i in t.column("sample_id").to_pylist()]
        if len(set(ids)) != len(ids):
            repeated = sorted(i for i, n in Counter(ids).items() if n > 1)[:5]
            raise PublishError(f"{name}: upserted sample_id(s) {', '.join(repeated)} appear more than once")
        gone = frozenset(str(i) for i in removed)
        both = sorted(gone & set(ids))
        if both:
            raise PublishError(
                f"{name}: sample_id(s) {', '.join(both[:5])} are both upserted and removed; pick one"
            )
        return cls(
            name=name,
            upserts=tables,
            removed=gone,
            base=base,
            kind=kind,
            config_hash=config_hash,
            shard_rows=shard_rows,
            dagster_run_id=dagster_run_id,
            batches=sorted(set(batches)) if batches is not None else None,
            stats=stats if callable(stats) else dict(stats or {}),
            force=force,
            audit=audit,
            retraction=dict(retraction) if retraction else None,
        )

    @property
    def over_base(self) -> bool:
        return True  # staged as a delta or, where the layout changes, in full: over its base either way

    @property
    def touching(self) -> pa.Array:
        """Every id the change concerns: upserted or removed."""
        parts = [t.column("sample_id").combine_chunks() for t in self.upserts.values()]
        parts.append(pa.array(sorted(self.removed), pa.string()))
        return pa.concat_arrays([p.cast(pa.string()) for p in parts])

    def stage(
        self,
        store: Store,
        work: str,
        *,
        parent: Manifest | None,
        parent_dir: str | None,
        place: Place | None,
        after_split: Callable[[str], None] | None = None,
    ) -> StagedShards:
        check_base(self.name, self.base, parent)
        if parent is None or parent_dir is None:  # a first version: the upserts are the whole table
            first = self.upserts or {"train": SAMPLE_SCHEMA.empty_table()}
            return self._full(first, store, work, place=place, after_split=after_split, parent=None)
        planned = plan(self, store, parent, parent_dir)
        if planned is None or place is None:
            whole = merged(self, store, parent, parent_dir)
            return self._full(whole, store, work, place=place, after_split=after_split, parent=parent)
        return apply(
            self,
            store=store,
            work=work,
            parent=parent,
            parent_dir=parent_dir,
            place=place,
            plan=planned,
            after_split=after_split,
        )

    def _full(
        self,
        splits: dict[str, pa.Table],
        store: Store,
        work: str,
        *,
        place: Place | None,
        after_split: Callable[[str], None] | None,
        parent: Manifest | None,
    ) -> StagedShards:
        batches = self.batches
        if batches is None:
            batches = sorted({b for t in splits.values() for b in t.column("batch").to_pylist()})
        full = PublishRequest.prepare(
            self.name,
            splits["train"] if list(splits) == ["train"] else splits,
            kind=self.kind,
            config_hash=self.config_hash,
            shard_rows=self.shard_rows,
            dagster_run_id=self.dagster_run_id,
            batches=batches,
            stats=self.stats,
            force=self.force,
            sort_by="sample_id",
            audit=self.audit,
            retraction=self.retraction,
        )
        return full.stage(store, work, parent=parent, parent_dir=None, place=place, after_split=after_split)
