"""The DuckDB catalog: versions, shards, a sample index and aliases, for fast queries.

A shard a version reuses from an earlier one (``ShardInfo.reused_from``) is not indexed again:
``shard_refs`` records (name, version, file) -> the version whose ``samples`` rows cover it, so
the sample index grows by the rows a version wrote and ``locate`` still lists every version.

The manifests are the source of truth; everything here can be rebuilt from them
(``ptf datasets reindex``). DuckDB lets one process write at a time, so every
connection is short-lived and retried while another process holds the lock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ptfactory.storage.duck import connect
from ptfactory.storage.manifest import Manifest

__all__ = ["Catalog"]

_DDL = """
CREATE TABLE IF NOT EXISTS versions (
    name TEXT, version INTEGER, parent INTEGER, kind TEXT, rows BIGINT,
    rows_added BIGINT, rows_removed BIGINT, code_version TEXT, config_hash TEXT,
    dagster_run_id TEXT, batches TEXT, stats TEXT, created_at TEXT, path TEXT,
    PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS shards (
    name TEXT, version INTEGER, file TEXT, split TEXT, sha256 TEXT, rows BIGINT, bytes BIGINT,
    PRIMARY KEY (name, version, file));
CREATE TABLE IF NOT EXISTS samples (
    sample_id TEXT, name TEXT, version INTEGER, shard TEXT, "row" BIGINT);
CREATE TABLE IF NOT EXISTS shard_refs (
    name TEXT, version INTEGER, file TEXT, from_version INTEGER, PRIMARY KEY (name, version, file));
CREATE TABLE IF NOT EXISTS aliases (
    name TEXT, alias TEXT, version INTEGER, PRIMARY KEY (name, alias));
CREATE TABLE IF NOT EXISTS training_runs (
    run_id TEXT PRIMARY KEY, kind TEXT, dataset TEXT, version INTEGER, manifest_sha256 TEXT,
    model TEXT, output_dir TEXT, config TEXT, metrics TEXT, created_at TEXT);
CREATE TABLE IF NOT EXISTS evaluations (
    run_id TEXT PRIMARY KEY, model TEXT, checkpoint TEXT, training_run_id TEXT, dataset TEXT,
    version INTEGER, tasks TEXT, success_rate DOUBLE, summary TEXT, report TEXT, created_at TEXT);
"""


class Catalog:
    """Short-lived DuckDB connections to ``catalog.duckdb``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ready = False

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        with connect(self.path, read_only=read_only and self.path.exists()) as con:
            if not self._ready and not read_only:
                con.execute(_DDL)
                self._ready = True
            yield con

    def register(
        self,
        manifest: Manifest,
        path: str,
        sample_index: pa.Table,
        refs: list[tuple[str, int]] | None = None,
    ) -> None:
        """Record a published version; ``sample_index`` (columns sample_id, shard, row) covers the
        shards it wrote, ``refs`` (file, from_version) the shards it reused."""
        split_of = {f: split for split, files in manifest.splits.items() for f in files}
        with self.connect() as con:
            con.execute("BEGIN")
            self._delete(con, manifest.name, manifest.version)
            con.execute(
                "INSERT INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    manifest.name,
                    manifest.version,
                    manifest.parent,
                    manifest.kind,
                    manifest.rows,
                    manifest.rows_added,
                    manifest.rows_removed,
                    manifest.code_version,
                    manifest.config_hash,
                    manifest.dagster_run_id,
                    json.dumps(manifest.batches),
                    json.dumps(manifest.stats),
                    manifest.created_at,
                    path,
                ],
            )
            con.executemany(  # a version always has at least one shard (an empty one if no rows)
                "INSERT INTO shards VALUES (?,?,?,?,?,?,?)",
                [
                    [
                        manifest.name,
                        manifest.version,
                        s.file,
                        split_of.get(s.file, "train"),
                        s.sha256,
                        s.rows,
                        s.bytes,
                    ]
                    for s in manifest.shards
                ],
            )
            index = sample_index  # noqa: F841 - referenced by name in the SQL below
            con.execute(
                'INSERT INTO samples SELECT sample_id, ?, ?, shard, "row" FROM index',
                [manifest.name, manifest.version],
            )
            if refs:
                con.executemany(
                    "INSERT INTO shard_refs VALUES (?,?,?,?)",
                    [[manifest.name, manifest.version, file, origin] for file, origin in refs],
                )
            con.execute("COMMIT")

    @staticmethod
    def _delete(con: duckdb.DuckDBPyConnection, name: str, version: int) -> None:
        for table in ("versions", "shards", "samples", "shard_refs"):
            con.execute(f"DELETE FROM {table} WHERE name = ? AND version = ?", [name, version])

    def set_aliases(self, name: str, aliases: dict[str, int]) -> None:
        with self.connect() as con:
            con.execute("BEGIN")
            con.execute("DELETE FROM aliases WHERE name = ?", [name])
            if aliases:
                con.executemany(
                    "INSERT INTO aliases VALUES (?,?,?)", [[name, a, v] for a, v in aliases.items()]
                )
            con.execute("COMMIT")

    def clear(self) -> None:
        with self.connect() as con:
            for table in ("versions", "shards", "samples", "shard_refs", "aliases"):
                con.execute(f"DELETE FROM {table}")

    def known_versions(self) -> set[tuple[str, int]]:
        with self.connect(read_only=True) as con:
            if not self._has_tables(con):
                return set()
            return {(n, v) for n, v in con.execute("SELECT name, version FROM versions").fetchall()}

    def locate(self, sample_id: str) -> list[dict[str, Any]]:
        """Every (dataset, version, shard, row) holding ``sample_id``, oldest first."""
        with self.connect(read_only=True) as con:
            if not self._has_tables(con):
                return []
            held = 'SELECT name, version, shard, "row" FROM samples WHERE sample_id = ?'
            params = [sample_id]
            if self._has_tables(con, "shard_refs"):  # a catalog from before shard reuse has none
                held += (
                    ' UNION ALL SELECT r.name, r.version, s.shard, s."row" FROM samples s JOIN shard_refs r'
                    " ON r.name = s.name AND r.from_version = s.version AND r.file = s.shard"
                    " WHERE s.sample_id = ?"
                )
                params.append(sample_id)
            rows = con.execute(f'{held} ORDER BY name, version, shard, "row"', params).fetchall()
        return [{"dataset": n, "version": v, "shard": s, "row": r} for n, v, s, r in rows]

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with self.connect(read_only=True) as con:
            if not self._has_tables(con):
                return []
            return con.execute(sql, params or []).fetchall()

    def execute(self, sql: str, params: list[Any] | None = None) -> None:
        with self.connect() as con:
            con.execute(sql, params or [])

    @staticmethod
    def _has_tables(con: duckdb.DuckDBPyConnection, table: str = "versions") -> bool:
        found = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]
        ).fetchall()
        return bool(found and found[0][0])
