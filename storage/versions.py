"""Immutable, versioned datasets under ``PTF_HOME/datasets/<name>/v<N>/``.

A version is published atomically: shards, ``manifest.json`` and the dataset card are
written into a hidden temp directory, fsynced, and renamed to ``v<N>`` in one step;
the catalog row comes last. A crash at any point leaves either no version or a
whole one. Object stores have no rename: there shards are staged under a unique
prefix, ``v<N>`` is claimed with a conditional create, the shards are copied in and
``manifest.json`` is created last, conditionally (``storage.commit``). Aliases
(``stable``) are a small JSON file per dataset, moved under the same lock.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from filelock import FileLock

from ptfactory.errors import DatasetRefError, ShardIntegrityError
from ptfactory.home import is_local_url, local_state_dir, ptf_home
from ptfactory.storage.aliases import ALIASES_FILE, moved, swap
from ptfactory.storage.audit import Audit, AuditFailed
from ptfactory.storage.catalog import Catalog
from ptfactory.storage.commit import publish_to_object_store
from ptfactory.storage.delta import BaseMoved, DeltaRequest
from ptfactory.storage.fs import Store
from ptfactory.storage.manifest import MANIFEST_FILE, Manifest, render_card
from ptfactory.storage.objectstore import object_ops
from ptfactory.storage.refs import NAME_RE, VERSION_RE, parse_ref
from ptfactory.storage.register import rows_added_removed, sample_index
from ptfactory.storage.seams import BEFORE_PUBLISH, pause
from ptfactory.storage.shards import ShardInfo, read_shard, verify_shard
from ptfactory.storage.staging import (
    PublishRequest,
    PublishResult,
    Request,
    StagedShards,
    Stats,
    audit_staged,
    build_manifest,
    same_as,
)

__all__ = ["AuditFailed", "BaseMoved", "DatasetStore", "PublishResult", "parse_ref"]


class DatasetStore:
    """Read, publish, tag and verify dataset versions."""

    def __init__(self, home: str | None = None) -> None:
        self.home = home or ptf_home()
        self.store = Store(posixpath.join(self.home, "datasets"))
        # DuckDB and lock files need a local disk, even when the shards live on S3.
        self.state_dir = Path(self.home) if is_local_url(self.home) else local_state_dir()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.catalog = Catalog(self.state_dir / "catalog.duckdb")

    # ---- reading -------------------------------------------------------------------------

    def names(self) -> list[str]:
        return [n for n in self.store.listdir(self.store.root) if NAME_RE.match(n)]

    def version_dir(self, name: str, version: int) -> str:
        return self.store.path(name, f"v{version}")

    def versions(self, name: str) -> list[int]:
        """Published versions, ascending: directories ``v<N>`` that hold a manifest."""
        if not self.store.local:  # one listing, not a request per version
            held = (e.split("/") for e in self.store.find(self.store.path(name)))
            return sorted(
                int(m.group(1)) for e in held if e[1:] == [MANIFEST_FILE] and (m := VERSION_RE.match(e[0]))
            )
        found = []
        for entry in self.store.listdir(self.store.path(name)):
            match = VERSION_RE.match(entry)
            if match and self.store.exists(self.store.path(name, entry, MANIFEST_FILE)):
                found.append(int(match.group(1)))
        return sorted(found)

    def latest(self, name: str) -> int:
        """The latest version's number; 0 when ``name`` has none."""
        versions = self.versions(name)
        return versions[-1] if versions else 0

    def manifest(self, name: str, version: int) -> Manifest:
        path = self.store.path(name, f"v{version}", MANIFEST_FILE)
        if not self.store.exists(path):
            raise DatasetRefError(f"dataset {name!r} has no version v{version}")
        return Manifest.from_json(self.store.read_bytes(path).decode("utf-8"), where=path)

    def aliases(self, name: str) -> dict[str, int]:
        path = self.store.path(name, ALIASES_FILE)
        if not self.store.exists(path):
            return {}
        body = json.loads(self.store.read_bytes(path))
        return {k: int(v) for k, v in body.get("aliases", {}).items()}

    def resolve(self, ref: str) -> Manifest:
        """The manifest a ``NAME@VERSION`` reference points at (``vN``, ``latest`` or an alias)."""
        name, version = parse_ref(ref)
        versions = self.versions(name)
        if not versions:
            known = ", ".join(self.names()) or "none yet"
            raise DatasetRefError(f"no dataset named {name!r} has been published (datasets: {known})")
        if version == "latest":
            return self.manifest(name, versions[-1])
        match = VERSION_RE.match(version)
        if match:
            number = int(match.group(1))
        else:
            aliases = self.aliases(name)
            if version not in aliases:
                listed = ", ".join(f"v{v}" for v in versions)
                names = ", ".join(sorted(aliases)) or "none"
                raise DatasetRefError(
                    f"{ref!r} names no version or alias of {name!r}; versions: {listed}; "
                    f"aliases: {names}; or use {name}@latest"
                )
            number = aliases[version]
        if number not in versions:
            listed = ", ".join(f"v{v}" for v in versions)
            raise DatasetRefError(f"dataset {name!r} has no version v{number}; versions: {listed}")
        return self.manifest(name, number)

    def read(
        self,
        ref: str,
        columns: list[str] | None = None,
        split: str | None = None,
        verify: bool = False,
    ) -> pa.Table:
        manifest = self.resolve(ref)
        directory = self.version_dir(manifest.name, manifest.version)
        wanted = set(manifest.splits.get(split, [])) if split else None
        tables = []
        for shard in manifest.shards:
            if wanted is not None and shard.file not in wanted:
                continue
            if verify:
                verify_shard(self.store, directory, shard)
            tables.append(read_shard(self.store, directory, shard, columns))
        if not tables:
            raise DatasetRefError(
                f"{manifest.ref} has no split {split!r}; splits: {', '.join(manifest.splits)}"
            )
        return pa.concat_tables(tables)

    def verify(self, ref: str) -> Manifest:
        manifest = self.resolve(ref)
        directory = self.version_dir(manifest.name, manifest.version)
        for shard in manifest.shards:
            verify_shard(self.store, directory, shard)
        return manifest

    # ---- publishing ----------------------------------------------------------------------

    def _lock(self, name: str) -> FileLock:
        if self.store.local:
            base = self.store.path(name)
            self.store.makedirs(base)
            return FileLock(posixpath.join(base, ".publish.lock"))
        return FileLock(str(self.state_dir / f"publish-{name}.lock"))

    def publish(
        self,
        name: str,
        splits: pa.Table | Mapping[str, pa.Table],
        *,
        kind: str,
        config_hash: str,
        shard_rows: int = 50_000,
        dagster_run_id: str | None = None,
        batches: list[str] | None = None,
        stats: Stats | None = None,
        force: bool = False,
        sort_by: str = "sample_id",
        audit: Audit | None = None,
        retraction: Mapping[str, Any] | None = None,
        reuse: bool = True,
        base: int | None = None,
    ) -> PublishResult:
        """Publish a new version; a no-op (``created=False``) when nothing changed, unless ``force``.

        ``splits`` is a table (one ``train`` split, shards ``part-*.parquet``) or a mapping of
        split name to table (shards ``<split>-*.parquet``). Rows are sorted by ``sort_by`` so
        the same rows always give the same bytes.

        ``audit`` runs on the staged version (its shards read back and verified) before anything
        is visible: a failing blocking check raises :class:`AuditFailed` and publishes nothing.
        ``retraction`` is recorded in the manifest (see ``ptf datasets retract``).

        Shards are buckets of a hash of ``sample_id`` (``storage.shards.write_buckets``): a bucket
        whose rows equal the parent's is not rewritten but hard-linked (server-side copied on an
        object store) and catalogued by reference, so a new label costs one shard, not the
        version. ``reuse=False`` rewrites every shard (the old cost; for benchmarks).

        On an object store the version is staged, claimed and committed with conditional creates
        (``storage.commit``), so publishers on many machines never share a version number.

        ``base``: the latest version when the rows were read (0: none yet). If another is latest by
        the time the publish holds the lock (on an object store: is settled below its claim),
        :class:`BaseMoved` is raised and nothing published: a table made from an older version
        would silently undo what the newer one changed (a retraction, another run's batch).
        """
        request = PublishRequest.prepare(
            name,
            splits,
            kind=kind,
            config_hash=config_hash,
            shard_rows=shard_rows,
            dagster_run_id=dagster_run_id,
            batches=batches,
            stats=stats,
            force=force,
            sort_by=sort_by,
            audit=audit,
            retraction=retraction,
            reuse=reuse,
            base=base,
        )
        return self._publish(request)

    def publish_delta(
        self,
        name: str,
        upserts: pa.Table | Mapping[str, pa.Table],
        removed: Iterable[str] = (),
        *,
        kind: str,
        config_hash: str,
        base: int | None = None,
        shard_rows: int = 50_000,
        dagster_run_id: str | None = None,
        batches: list[str] | None = None,
        stats: Stats | None = None,
        force: bool = False,
        audit: Audit | None = None,
        retraction: Mapping[str, Any] | None = None,
    ) -> PublishResult:
        """Publish the latest version changed by ``upserts`` (rows put in, by split; a row replaces any
        row of its ``sample_id`` in any split) and ``removed`` (ids taken out): the work and the
        audit cover the buckets the change falls in, not the version (``storage.delta``).

        The result is exactly the version :meth:`publish` makes of the merged table (same shards,
        sha256, stats). ``base``: the version the change was computed over (0: none); if another is
        latest by then, :class:`BaseMoved` is raised and nothing published. ``batches`` None lists the batches
        of the version's rows. No latest version: the upserts are published as the first.
        """
        request = DeltaRequest.prepare(
            name,
            upserts,
            removed,
            base=base,
            kind=kind,
            config_hash=config_hash,
            shard_rows=shard_rows,
            dagster_run_id=dagster_run_id,
            batches=batches,
            stats=stats,
            force=force,
            audit=audit,
            retraction=retraction,
        )
        return self._publish(request)

    def _publish(self, request: Request) -> PublishResult:
        pause(BEFORE_PUBLISH, request.name)  # tests: hold a publisher between its reads and the lock
        if not self.store.local:
            return publish_to_object_store(self, request)
        with self._lock(request.name):
            return self._publish_local(request)

    def _publish_local(self, request: Request) -> PublishResult:
        name = request.name
        base = self.store.path(name)
        self._remove_stale_temps(base)
        existing = self.versions(name)
        version = (existing[-1] + 1) if existing else 1
        parent = self.manifest(name, existing[-1]) if existing else None
        parent_dir = self.version_dir(name, parent.version) if parent is not None else None
        work = posixpath.join(base, f".tmp-v{version}-{uuid.uuid4().hex[:8]}")
        self.store.makedirs(work)
        try:
            staged = request.stage(
                self.store, work, parent=parent, parent_dir=parent_dir, place=self._linker(parent)
            )
            if (
                parent is not None
                and not request.force
                and same_as(parent, staged.shards, request.config_hash)
            ):
                self.store.remove(work, recursive=True)
                return PublishResult(parent, self.version_dir(name, parent.version), created=False)
            checks = audit_staged(request, self.store, work, version=version, staged=staged)
            added_removed = self._diff(parent, staged)
            manifest = build_manifest(
                request, version, parent, staged=staged, checks=checks, added_removed=added_removed
            )
            self.store.write_bytes_atomic(posixpath.join(work, "README.md"), render_card(manifest).encode())
            self.store.write_bytes_atomic(posixpath.join(work, MANIFEST_FILE), manifest.to_json().encode())
            final = self.version_dir(name, version)
            self.store.rename_dir(work, final)
        except BaseException:
            # a refused audit or a failed write: nothing of the version may stay where a glob finds it
            self.store.remove(work, recursive=True)
            raise
        self._register(manifest, final, staged)
        return PublishResult(manifest, final, created=True)

    def _linker(self, parent: Manifest | None) -> Callable[[ShardInfo, str], None] | None:
        """Hard-link a parent's unchanged shard into the new version (a copy where links fail)."""
        if parent is None:
            return None
        source = self.version_dir(parent.name, parent.version)

        def place(old: ShardInfo, dest: str) -> None:
            try:
                os.link(posixpath.join(source, old.file), dest)
            except OSError:
                shutil.copyfile(posixpath.join(source, old.file), dest)

        return place

    def _remove_stale_temps(self, base: str) -> None:
        # Only called under the publish lock, so any temp dir here belongs to a dead publisher.
        for entry in self.store.listdir(base):
            if entry.startswith(".tmp-"):
                self.store.remove(posixpath.join(base, entry), recursive=True)

    def _diff(self, parent: Manifest | None, staged: StagedShards) -> tuple[int, int]:
        return rows_added_removed(self.store, parent, staged, self._dir_of(parent))

    def _register(self, manifest: Manifest, path: str, staged: StagedShards | None = None) -> None:
        index, refs = sample_index(self.store, manifest, path, staged)
        self.catalog.register(manifest, path, index, refs)

    def _dir_of(self, parent: Manifest | None) -> str | None:
        return self.version_dir(parent.name, parent.version) if parent is not None else None

    # ---- aliases and catalog ---------------------------------------------------------------

    def tag(self, ref: str, alias: str) -> tuple[int | None, Manifest]:
        """Point ``alias`` at the version ``ref`` resolves to; returns (previous version, manifest)."""
        if alias == "latest" or VERSION_RE.match(alias) or not NAME_RE.match(alias):
            raise DatasetRefError(
                f"{alias!r} cannot be an alias; pick a name like 'stable' (not 'latest' or 'vN')"
            )
        manifest = self.resolve(ref)
        name = manifest.name
        path = self.store.path(name, ALIASES_FILE)
        if self.store.local:
            with self._lock(name):
                current = self.store.read_bytes(path) if self.store.exists(path) else None
                data, previous, aliases = moved(current, alias, manifest.version)
                self.store.write_bytes_atomic(path, data)
        else:
            # machines share no lock on an object store: a compare-and-swap of the file instead
            previous, aliases = swap(
                object_ops(self.store, self.state_dir), path, lambda c: moved(c, alias, manifest.version)
            )
        self.catalog.set_aliases(name, aliases)
        return previous, manifest

    def reindex(self) -> int:
        """Rebuild the catalog from the manifests on disk; returns the number of versions indexed."""
        self.catalog.clear()
        count = 0
        for name in self.names():
            for version in self.versions(name):
                self._register(self.manifest(name, version), self.version_dir(name, version))
                count += 1
            self.catalog.set_aliases(name, self.aliases(name))
        return count

    def sync_catalog(self) -> None:
        """Register versions the catalog missed (e.g. a crash between rename and catalog row)."""
        known = self.catalog.known_versions()
        for name in self.names():
            for version in self.versions(name):
                if (name, version) not in known:
                    try:
                        self._register(self.manifest(name, version), self.version_dir(name, version))
                    except ShardIntegrityError:
                        continue
