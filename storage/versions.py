"""Immutable, versioned datasets under ``PTF_HOME/datasets/<name>/v<N>/``.

A version is published atomically: shards, ``manifest.json`` and the dataset card are
written into a hidden temp directory, fsynced, and renamed to ``v<N>`` in one step;
the catalog row comes last. A crash at any point leaves either no version or a
whole one. Object stores (no rename) write in place and make the version visible
by writing ``manifest.json`` last. Aliases (``stable``) are a small JSON file per
dataset, moved under the same lock.
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from filelock import FileLock

from ptfactory.errors import DatasetRefError, PublishError, ShardIntegrityError
from ptfactory.home import is_local_url, local_state_dir, ptf_home
from ptfactory.storage.audit import Audit, AuditFailed, Staged, run_audit
from ptfactory.storage.catalog import Catalog
from ptfactory.storage.fs import Store
from ptfactory.storage.manifest import MANIFEST_FILE, Manifest, render_card, schema_to_json
from ptfactory.storage.refs import NAME_RE, VERSION_RE, check_name, parse_ref
from ptfactory.storage.schema import conform, validate_table
from ptfactory.storage.shards import ShardInfo, read_shard, verify_shard, write_shards
from ptfactory.storage.stats import table_stats
from ptfactory.version import code_version

__all__ = ["AuditFailed", "DatasetStore", "PublishResult", "parse_ref"]

ALIASES_FILE = "aliases.json"


@dataclass(frozen=True)
class PublishResult:
    manifest: Manifest
    path: str
    created: bool  # False when the rows and config equal the latest version's: nothing new published


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
        found = []
        for entry in self.store.listdir(self.store.path(name)):
            match = VERSION_RE.match(entry)
            if match and self.store.exists(self.store.path(name, entry, MANIFEST_FILE)):
                found.append(int(match.group(1)))
        return sorted(found)

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
        stats: Mapping[str, Any] | None = None,
        force: bool = False,
        sort_by: str = "sample_id",
        audit: Audit | None = None,
        retraction: Mapping[str, Any] | None = None,
    ) -> PublishResult:
        """Publish a new version; a no-op (``created=False``) when nothing changed, unless ``force``.

        ``splits`` is a table (one ``train`` split, shards ``part-*.parquet``) or a mapping of
        split name to table (shards ``<split>-*.parquet``). Rows are sorted by ``sort_by`` so
        the same rows always give the same bytes.

        ``audit`` runs on the staged version (its shards read back and verified) before anything
        is visible: a failing blocking check raises :class:`AuditFailed` and publishes nothing.
        ``retraction`` is recorded in the manifest (see ``ptf datasets retract``).
        """
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

        with self._lock(name):
            return self._publish_locked(
                name,
                prepared,
                kind=kind,
                config_hash=config_hash,
                shard_rows=shard_rows,
                dagster_run_id=dagster_run_id,
                batches=batches or [],
                stats=dict(stats or {}),
                force=force,
                all_ids=all_ids,
                audit=audit,
                retraction=dict(retraction) if retraction else None,
            )

    def _publish_locked(
        self,
        name: str,
        prepared: dict[str, tuple[pa.Table, pa.Array]],
        *,
        kind: str,
        config_hash: str,
        shard_rows: int,
        dagster_run_id: str | None,
        batches: list[str],
        stats: dict[str, Any],
        force: bool,
        all_ids: pa.ChunkedArray,
        audit: Audit | None,
        retraction: dict[str, Any] | None,
    ) -> PublishResult:
        base = self.store.path(name)
        self._remove_stale_temps(base)
        existing = self.versions(name)
        version = (existing[-1] + 1) if existing else 1
        parent = self.manifest(name, existing[-1]) if existing else None
        single = list(prepared) == ["train"]
        work = (
            posixpath.join(base, f".tmp-v{version}-{uuid.uuid4().hex[:8]}")
            if self.store.local
            else self.version_dir(name, version)
        )
        self.store.makedirs(work)
        try:
            shards: list[ShardInfo] = []
            split_files: dict[str, list[str]] = {}
            for split, (table, order) in prepared.items():
                written = write_shards(
                    table, self.store, work, shard_rows, prefix="part" if single else split, order=order
                )
                shards.extend(written)
                split_files[split] = [s.file for s in written]
            if parent is not None and not force and self._same_as(parent, shards, config_hash):
                self.store.remove(work, recursive=True)
                return PublishResult(parent, self.version_dir(name, parent.version), created=False)
            staged = Staged(name, version, kind, tuple(sorted(set(batches))), {})
            checks = (
                run_audit(audit, self.store, work, staged, split_files=split_files, shards=shards)
                if audit
                else {}
            )
            added, removed = self._diff(parent, all_ids)
            sorted_ids = {
                split: pc.take(table.column("sample_id"), order).combine_chunks()
                for split, (table, order) in prepared.items()
            }
            manifest = Manifest(
                name=name,
                version=version,
                parent=parent.version if parent else None,
                kind=kind,
                rows=len(all_ids),
                shards=shards,
                schema=schema_to_json(next(iter(prepared.values()))[0].schema),
                code_version=code_version(),
                config_hash=config_hash,
                dagster_run_id=dagster_run_id,
                batches=sorted(set(batches)),
                rows_added=added,
                rows_removed=removed,
                splits=split_files,
                stats={**table_stats({k: t for k, (t, _) in prepared.items()}), **stats},
                created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                checks=checks,
                retraction=retraction,
            )
            self.store.write_bytes_atomic(posixpath.join(work, "README.md"), render_card(manifest).encode())
            # The manifest goes last: on object stores its presence is what makes a version visible.
            self.store.write_bytes_atomic(posixpath.join(work, MANIFEST_FILE), manifest.to_json().encode())
            final = self.version_dir(name, version)
            if self.store.local:
                self.store.rename_dir(work, final)
        except AuditFailed:
            # nothing of a refused version may stay where a reader's glob of vN/ would find it
            self.store.remove(work, recursive=True)
            raise
        except BaseException:
            if self.store.local:
                self.store.remove(work, recursive=True)
            raise
        self._register(manifest, final, sorted_ids)
        return PublishResult(manifest, final, created=True)

    def _remove_stale_temps(self, base: str) -> None:
        # Only called under the publish lock, so any temp dir here belongs to a dead publisher.
        for entry in self.store.listdir(base):
            if entry.startswith(".tmp-"):
                self.store.remove(posixpath.join(base, entry), recursive=True)

    def _same_as(self, parent: Manifest, shards: list[ShardInfo], config_hash: str) -> bool:
        return parent.config_hash == config_hash and [(s.file, s.sha256) for s in parent.shards] == [
            (s.file, s.sha256) for s in shards
        ]

    def _diff(self, parent: Manifest | None, ids: pa.ChunkedArray) -> tuple[int, int]:
        if parent is None:
            return len(ids), 0
        old = self.read(f"{parent.name}@v{parent.version}", columns=["sample_id"]).column("sample_id")
        added = int(pc.sum(pc.invert(pc.is_in(ids, value_set=old.combine_chunks()))).as_py() or 0)
        removed = int(pc.sum(pc.invert(pc.is_in(old, value_set=ids.combine_chunks()))).as_py() or 0)
        return added, removed

    def _register(self, manifest: Manifest, path: str, sorted_ids: dict[str, pa.Array] | None = None) -> None:
        """Catalog rows for a version; ``sorted_ids`` (per split, shard order) saves reading shards back."""
        by_file = {s.file: s for s in manifest.shards}
        parts = []
        for split, files in (manifest.splits or {"train": list(by_file)}).items():
            ids = sorted_ids.get(split) if sorted_ids else None
            offset = 0
            for file in files:
                shard = by_file[file]
                if ids is not None:
                    column = ids.slice(offset, shard.rows)
                else:
                    column = read_shard(self.store, path, shard, ["sample_id"]).column("sample_id")
                offset += shard.rows
                parts.append(
                    pa.table(
                        {
                            "sample_id": column,
                            "shard": pa.repeat(pa.scalar(file, pa.string()), shard.rows),
                            "row": pa.array(np.arange(shard.rows, dtype=np.int64)),
                        }
                    )
                )
        self.catalog.register(manifest, path, pa.concat_tables(parts))

    # ---- aliases and catalog ---------------------------------------------------------------

    def tag(self, ref: str, alias: str) -> tuple[int | None, Manifest]:
        """Point ``alias`` at the version ``ref`` resolves to; returns (previous version, manifest)."""
        if alias == "latest" or VERSION_RE.match(alias) or not NAME_RE.match(alias):
            raise DatasetRefError(
                f"{alias!r} cannot be an alias; pick a name like 'stable' (not 'latest' or 'vN')"
            )
        manifest = self.resolve(ref)
        name = manifest.name
        with self._lock(name):
            path = self.store.path(name, ALIASES_FILE)
            body: dict[str, Any] = {"aliases": {}, "history": []}
            if self.store.exists(path):
                body = json.loads(self.store.read_bytes(path))
            previous = body["aliases"].get(alias)
            body["aliases"][alias] = manifest.version
            body["history"].append(
                {
                    "alias": alias,
                    "version": manifest.version,
                    "previous": previous,
                    "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                }
            )
            self.store.write_bytes_atomic(path, (json.dumps(body, indent=2) + "\n").encode())
            self.catalog.set_aliases(name, {k: int(v) for k, v in body["aliases"].items()})
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
