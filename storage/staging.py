"""What both publish paths share: the prepared request, the staged shards, the audit, the manifest.

A local publish stages into a hidden temp directory and renames it (``storage.versions``); an
object-store publish stages under a unique prefix and commits by claim, copy and a conditional
create of the manifest (``storage.commit``). Everything here is the same for both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.errors import PublishError
from ptfactory.storage.audit import Audit, Staged, run_audit
from ptfactory.storage.fs import Store
from ptfactory.storage.manifest import Manifest, schema_to_json
from ptfactory.storage.refs import check_name
from ptfactory.storage.schema import conform, validate_table
from ptfactory.storage.shards import ShardInfo, bucket_count, write_buckets
from ptfactory.storage.stats import table_stats
from ptfactory.version import code_version

__all__ = [
    "PublishRequest",
    "PublishResult",
    "StagedShards",
    "audit_staged",
    "build_manifest",
    "same_as",
    "write_splits",
]

# Puts a parent's unchanged shard at a path of the new version (a hard link, a server-side copy).
Place = Callable[[ShardInfo, str], None]


@dataclass(frozen=True)
class PublishResult:
    manifest: Manifest
    path: str
    created: bool  # False when the rows and config equal the latest version's: nothing new published


@dataclass(frozen=True)
class PublishRequest:
    """A validated publish: each split's table with its sorted row order, and what the manifest records."""

    name: str
    prepared: dict[str, tuple[pa.Table, pa.Array]]  # split -> (table, sort order)
    all_ids: pa.ChunkedArray
    kind: str
    config_hash: str
    shard_rows: int
    dagster_run_id: str | None
    batches: list[str]
    stats: dict[str, Any]
    force: bool
    audit: Audit | None
    retraction: dict[str, Any] | None
    reuse: bool = True  # False: rewrite every shard even when the parent holds it (benchmarks)

    @classmethod
    def prepare(
        cls,
        name: str,
        splits: pa.Table | Mapping[str, pa.Table],
        *,
        kind: str,
        config_hash: str,
        shard_rows: int,
        dagster_run_id: str | None,
        batches: list[str] | None,
        stats: Mapping[str, Any] | None,
        force: bool,
        sort_by: str,
        audit: Audit | None,
        retraction: Mapping[str, Any] | None,
        reuse: bool = True,
    ) -> PublishRequest:
        check_name(name)
        named = {"train": splits} if isinstance(splits, pa.Table) else dict(splits)
        prepared: dict[str, tuple[pa.Table, pa.Array]] = {}
        for split, given in named.items():
            table = conform(given)
            validate_table(table)
            # Sorted row order, applied shard by shard while writing (no full copy of the table).
            prepared[split] = (table, pc.sort_indices(table, [(sort_by, "ascending")]))
        all_ids = pa.chunked_array(
            [pc.take(t.column("sample_id"), order).combine_chunks() for t, order in prepared.values()],
            pa.string(),
        )
        if pc.count_distinct(all_ids).as_py() != len(all_ids):
            raise PublishError(f"{name}: a sample_id appears in more than one split")
        return cls(
            name=name,
            prepared=prepared,
            all_ids=all_ids,
            kind=kind,
            config_hash=config_hash,
            shard_rows=shard_rows,
            dagster_run_id=dagster_run_id,
            batches=sorted(set(batches or [])),
            stats=dict(stats or {}),
            force=force,
            audit=audit,
            retraction=dict(retraction) if retraction else None,
            reuse=reuse,
        )

    @property
    def single(self) -> bool:
        return list(self.prepared) == ["train"]


@dataclass(frozen=True)
class StagedShards:
    shards: list[ShardInfo]
    split_files: dict[str, list[str]]  # split -> its shard files
    buckets: dict[str, int]  # split -> bucket count
    ids: dict[str, pa.Array]  # shard file -> sample ids in row order, for the shards written (not reused)


def write_splits(
    request: PublishRequest,
    store: Store,
    work: str,
    after_split: Callable[[str], None] | None = None,
    *,
    parent: Manifest | None = None,
    place: Place | None = None,
) -> StagedShards:
    """Write every split's bucketed shards into ``work``.

    With a ``parent`` and ``place`` (and ``request.reuse``), a bucket whose rows equal the parent's
    shard of that name is not written: ``place`` puts the parent's bytes in ``work`` instead.
    """
    shards: list[ShardInfo] = []
    split_files: dict[str, list[str]] = {}
    buckets: dict[str, int] = {}
    ids: dict[str, pa.Array] = {}
    by_file = {s.file: s for s in parent.shards} if parent is not None else {}
    for split, (table, order) in request.prepared.items():
        prefix = "part" if request.single else split
        before = parent.buckets.get(split) if parent is not None else None
        count = bucket_count(table.num_rows, request.shard_rows, before)
        previous: dict[str, ShardInfo] = {}
        if parent is not None and request.reuse and place is not None and count == before:
            for file in parent.splits.get(split, []):
                old = by_file[file]
                origin = old.reused_from if old.reused_from is not None else parent.version
                previous[file] = ShardInfo(old.file, old.sha256, old.rows, old.bytes, old.fingerprint, origin)
        written, written_ids = write_buckets(
            table, store, work, buckets=count, prefix=prefix, order=order, previous=previous, place=place
        )
        shards.extend(written)
        split_files[split] = [s.file for s in written]
        buckets[split] = count
        ids.update(written_ids)
        if after_split is not None:
            after_split(split)
    return StagedShards(shards, split_files, buckets, ids)


def same_as(parent: Manifest, shards: list[ShardInfo], config_hash: str) -> bool:
    """Whether staged shards and config equal ``parent``'s: publishing them would add nothing."""
    return parent.config_hash == config_hash and [(s.file, s.sha256) for s in parent.shards] == [
        (s.file, s.sha256) for s in shards
    ]


def audit_staged(
    request: PublishRequest,
    store: Store,
    work: str,
    *,
    version: int,
    shards: list[ShardInfo],
    split_files: dict[str, list[str]],
) -> dict[str, Any]:
    """Run the request's audit on the shards staged in ``work`` (raises ``AuditFailed``); {} without one."""
    if request.audit is None:
        return {}
    staged = Staged(request.name, version, request.kind, tuple(request.batches), {})
    return run_audit(request.audit, store, work, staged, split_files=split_files, shards=shards)


def build_manifest(
    request: PublishRequest,
    version: int,
    parent: Manifest | None,
    *,
    shards: list[ShardInfo],
    split_files: dict[str, list[str]],
    checks: dict[str, Any],
    added_removed: tuple[int, int],
    buckets: dict[str, int] | None = None,
) -> Manifest:
    first_table = next(iter(request.prepared.values()))[0]
    return Manifest(
        name=request.name,
        version=version,
        parent=parent.version if parent else None,
        kind=request.kind,
        rows=len(request.all_ids),
        shards=shards,
        schema=schema_to_json(first_table.schema),
        code_version=code_version(),
        config_hash=request.config_hash,
        dagster_run_id=request.dagster_run_id,
        batches=list(request.batches),
        rows_added=added_removed[0],
        rows_removed=added_removed[1],
        splits=split_files,
        stats={**table_stats({k: t for k, (t, _) in request.prepared.items()}), **request.stats},
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        checks=checks,
        retraction=request.retraction,
        buckets=dict(buckets or {}),
    )
