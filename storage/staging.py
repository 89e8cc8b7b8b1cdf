"""What both publish paths share: the prepared request, the staged shards, the audit, the manifest.

A local publish stages into a hidden temp directory and renames it (``storage.versions``); an
object-store publish stages under a unique prefix and commits by claim, copy and a conditional
create of the manifest (``storage.commit``). Everything here is the same for both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.errors import PublishError
from ptfactory.storage.audit import Audit, Delta, Staged, run_audit
from ptfactory.storage.fs import Store
from ptfactory.storage.manifest import Manifest, schema_to_json
from ptfactory.storage.refs import check_name
from ptfactory.storage.rowsums import RowSums, sums_of
from ptfactory.storage.schema import conform, validate_table
from ptfactory.storage.shards import ShardInfo, bucket_count, row_hashes, write_buckets
from ptfactory.storage.stats import table_stats
from ptfactory.version import code_version

__all__ = [
    "BaseMoved",
    "Place",
    "PublishRequest",
    "PublishResult",
    "Request",
    "StagedDelta",
    "StagedShards",
    "Stats",
    "audit_staged",
    "batches_of",
    "build_manifest",
    "check_base",
    "same_as",
    "write_splits",
]

# Puts a parent's unchanged shard at a path of the new version (a hard link, a server-side copy).
Place = Callable[[ShardInfo, str], None]
# What a caller adds to a manifest's stats: a mapping, or a function of the stats computed over the
# version's rows (so a delta publish, which never sees every row, can derive them the same way)
Stats = Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]]


class BaseMoved(PublishError):
    """The rows were computed over a version that is no longer the latest: compute them again."""


def check_base(name: str, base: int | None, parent: Manifest | None) -> None:
    """Raise :class:`BaseMoved` unless ``parent`` (the latest, read under the publish lock or settled
    below the claim) is ``base``: the version the rows were computed over (0: none yet; None: any)."""
    if base is None:
        return
    now = parent.version if parent is not None else 0
    if now != base:
        computed = f"v{base}" if base else "no version"
        latest = f"v{now}" if now else "no version"
        raise BaseMoved(
            f"{name}: the rows were computed over {computed} but the latest is {latest}; "
            "compute them again over the latest version"
        )


class Request(Protocol):
    """What both publish requests (a whole table, ``PublishRequest``; a change, ``DeltaRequest``) give."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def config_hash(self) -> str: ...
    @property
    def dagster_run_id(self) -> str | None: ...
    @property
    def batches(self) -> list[str] | None: ...
    @property
    def stats(self) -> Stats: ...
    @property
    def force(self) -> bool: ...
    @property
    def audit(self) -> Audit | None: ...
    @property
    def retraction(self) -> dict[str, Any] | None: ...
    @property
    def over_base(self) -> bool:
        """Whether the rows depend on the version staged on (a change), so it must be the newest."""
        ...

    def stage(
        self,
        store: Store,
        work: str,
        *,
        parent: Manifest | None,
        parent_dir: str | None,
        place: Place | None,
        after_split: Callable[[str], None] | None = None,
    ) -> StagedShards: ...


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
    batches: list[str] | None  # always a list here; None only on a DeltaRequest
    stats: Stats
    force: bool
    audit: Audit | None
    retraction: dict[str, Any] | None
    reuse: bool = True  # False: rewrite every shard even when the parent holds it (benchmarks)
    base: int | None = None  # the latest version when the rows were read (0: none; None: unchecked)

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
        stats: Stats | None,
        force: bool,
        sort_by: str,
        audit: Audit | None,
        retraction: Mapping[str, Any] | None,
        reuse: bool = True,
        base: int | None = None,
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
            stats=stats if callable(stats) else dict(stats or {}),
            force=force,
            audit=audit,
            retraction=dict(retraction) if retraction else None,
            reuse=reuse,
            base=base,
        )

    @property
    def single(self) -> bool:
        return list(self.prepared) == ["train"]

    @property
    def over_base(self) -> bool:
        # every row is in hand, but a table read from a base must not land over a newer version
        return self.base is not None

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
        del parent_dir  # every row is in hand: nothing of the parent is read
        check_base(self.name, self.base, parent)
        return write_splits(self, store, work, after_split, parent=parent, place=place)


@dataclass(frozen=True)
class StagedDelta:
    """How a version staged by a delta publish differs from the version it was made over."""

    base: Manifest
    changed: dict[str, pa.Table]  # split -> the rows put in (new content), as staged
    removed: frozenset[str]  # ids the base held that the version does not (in any split)
    replaced: dict[str, ShardInfo | None]  # rewritten shard -> the base's shard of that bucket
    added: int  # rows added / removed against the base
    dropped: int


@dataclass(frozen=True)
class StagedShards:
    shards: list[ShardInfo]
    split_files: dict[str, list[str]]  # split -> its shard files
    buckets: dict[str, int]  # split -> bucket count
    ids: dict[str, pa.Array]  # shard file -> sample ids in row order, for the shards written (not reused)
    rows: int
    schema: pa.Schema
    stats: dict[str, Any]  # ``table_stats`` of the version's rows
    row_sums: RowSums | None
    delta: StagedDelta | None = None  # set by a delta publish (``storage.delta``)
    all_ids: pa.ChunkedArray | None = None  # every row's id (a full publish has them in hand)


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
    hashed: list[np.ndarray[Any, np.dtype[np.uint64]] | None] = []
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
        hashes = row_hashes(table)
        hashed.append(hashes)
        written, written_ids = write_buckets(
            table,
            store,
            work,
            buckets=count,
            prefix=prefix,
            order=order,
            previous=previous,
            place=place,
            hashes=hashes,
        )
        shards.extend(written)
        split_files[split] = [s.file for s in written]
        buckets[split] = count
        ids.update(written_ids)
        if after_split is not None:
            after_split(split)
    tables = [t for t, _ in request.prepared.values()]
    sums = None
    if all(h is not None for h in hashed):
        sums = sums_of(tables, [h for h in hashed if h is not None], max(buckets.values()))
    return StagedShards(
        shards,
        split_files,
        buckets,
        ids,
        rows=len(request.all_ids),
        schema=tables[0].schema,
        stats=table_stats({k: t for k, (t, _) in request.prepared.items()}),
        row_sums=sums,
        all_ids=request.all_ids,
    )


def same_as(parent: Manifest, shards: list[ShardInfo], config_hash: str) -> bool:
    """Whether staged shards and config equal ``parent``'s: publishing them would add nothing."""
    return parent.config_hash == config_hash and [(s.file, s.sha256) for s in parent.shards] == [
        (s.file, s.sha256) for s in shards
    ]


def audit_staged(
    request: Request,
    store: Store,
    work: str,
    *,
    version: int,
    staged: StagedShards,
) -> dict[str, Any]:
    """Run the request's audit on the shards staged in ``work`` (raises ``AuditFailed``); {} without one.

    A version staged by a delta publish is audited as a change over its base (``storage.audit.Delta``):
    checks that can look at the rows put in and rely on the base's passed result do.
    """
    if request.audit is None:
        return {}
    meta = Staged(request.name, version, request.kind, tuple(batches_of(request, staged)), {})
    delta = None
    if staged.delta is not None:
        delta = Delta(
            parent=staged.delta.base,
            changed=staged.delta.changed,
            removed=staged.delta.removed,
            split_files=staged.split_files,
            shards={s.file: s for s in staged.shards},
            replaced=staged.delta.replaced,
            buckets=staged.buckets,
            read=lambda file, columns=None: store.read_table(store.path(work, file), columns),
        )
    return run_audit(
        request.audit, store, work, meta, split_files=staged.split_files, shards=staged.shards, delta=delta
    )


def batches_of(request: Request, staged: StagedShards) -> list[str]:
    """The batches a manifest lists: the caller's, or (None) those the version's rows come from."""
    if request.batches is not None:
        return list(request.batches)
    return sorted(staged.stats.get("rows_per_batch", {}))


def build_manifest(
    request: Request,
    version: int,
    parent: Manifest | None,
    *,
    staged: StagedShards,
    checks: dict[str, Any],
    added_removed: tuple[int, int],
) -> Manifest:
    extra = request.stats(staged.stats) if callable(request.stats) else request.stats
    return Manifest(
        name=request.name,
        version=version,
        parent=parent.version if parent else None,
        kind=request.kind,
        rows=staged.rows,
        shards=staged.shards,
        schema=schema_to_json(staged.schema),
        code_version=code_version(),
        config_hash=request.config_hash,
        dagster_run_id=request.dagster_run_id,
        batches=batches_of(request, staged),
        rows_added=added_removed[0],
        rows_removed=added_removed[1],
        splits=staged.split_files,
        stats={**staged.stats, **extra},
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        checks=checks,
        retraction=request.retraction,
        buckets=dict(staged.buckets),
        row_sums=staged.row_sums.to_json() if staged.row_sums is not None else None,
    )
