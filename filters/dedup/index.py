"""A persistent LSH index of every published sample, in DuckDB (on disk, not a pickle in RAM).

Two tables: ``bands(band, key, sample_id)`` for candidate lookup and ``signatures(sample_id,
sig)`` for verification. A new batch's band keys are joined against ``bands`` in one query;
candidates are verified on the signatures. Updated when a version is published, rebuildable
from the published datasets, and safe for concurrent readers (DuckDB read-only connections,
one short writer at a time).

On a cluster the truth is :class:`BandParquet` under ``PTF_HOME`` (a path or an object store, through
:class:`~ptfactory.storage.fs.Store`): each publish writes its band keys as Parquet files split into
``partitions`` by key, and its signatures beside them, every file written atomically and never
changed. Any worker reads them; the DuckDB file is then this machine's cache, brought up to date
(file by file, so memory is bounded by one file, not by the corpus) before each lookup.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

from ptfactory.errors import ConfigError
from ptfactory.filters.dedup.core import DedupConfig
from ptfactory.filters.dedup.lsh import band_keys, estimated_jaccard
from ptfactory.filters.dedup.minhash import SHINGLE_HASH, hash_library
from ptfactory.storage.duck import connect
from ptfactory.storage.fs import Store

__all__ = ["BandParquet", "PublishedIndex"]

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS bands (band USMALLINT, key UBIGINT, sample_id TEXT);
CREATE TABLE IF NOT EXISTS signatures (
    sample_id TEXT PRIMARY KEY, batch TEXT, dataset TEXT, version INTEGER, sig BLOB);
CREATE TABLE IF NOT EXISTS parquet_files (name TEXT PRIMARY KEY);
"""
_PARAMS = ("threshold", "num_perm", "ngram", "seed", "fp_weight", "fn_weight")


class BandParquet:
    """``<root>/bands/part=NNN/<publish>.parquet`` (band, key, sample_id) and
    ``<root>/signatures/<publish>.parquet`` (sample_id, batch, dataset, version, sig), plus
    ``params.json``: the published-sample index as files any worker can read."""

    def __init__(self, root: str, partitions: int = 64) -> None:
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        self.store = Store(root)
        self.partitions = partitions

    def files(self) -> list[str]:
        """Every data file, relative to the root, signatures before bands (a band needs its signature)."""
        found = [f for f in self.store.find(self.store.path()) if f.endswith(".parquet") and "/." not in f]
        return sorted(found, key=lambda f: (not f.startswith("signatures/"), f))

    def check_params(self, params: str) -> None:
        path = self.store.path("params.json")
        if not self.store.exists(path):
            self.store.write_bytes_atomic(path, params.encode())
        elif (recorded := self.store.read_bytes(path).decode()) != params:
            raise ConfigError(
                f"the dedup index at {self.store.root} was built with {recorded}, not {params}; "
                "rebuild it with `ptf datasets reindex` after changing dedup settings"
            )

    def write(self, signatures: pa.Table, bands: pa.Table) -> list[str]:
        """One publish's rows as new files (each appears whole or not at all); their names."""
        name = f"{uuid.uuid4().hex}.parquet"
        written = [posixpath.join("signatures", name)]
        self._write(written[0], signatures)
        part = (bands.column("key").to_numpy() % np.uint64(self.partitions)).astype(np.int64)
        for p in np.unique(part):
            rel = posixpath.join("bands", f"part={p:03d}", name)
            self._write(rel, bands.filter(pa.array(part == p)))
            written.append(rel)
        return written

    def _write(self, rel: str, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        with self.store.atomic_writer(self.store.path(rel)) as handle:
            pq.write_table(table, handle, compression="zstd")

    def read(self, rel: str) -> pa.Table:
        return self.store.read_table(self.store.path(rel))


class PublishedIndex:
    def __init__(self, path: Path, config: DedupConfig, parquet: BandParquet | None = None) -> None:
        self.path = path
        self.config = config
        self.parquet = parquet

    def sync(self) -> int:
        """Bring the DuckDB cache up to date with the Parquet files (none: nothing to do); how many
        files it read. One file at a time: memory is bounded by the largest file."""
        if self.parquet is None:
            return 0
        self.parquet.check_params(self._params())
        names = self.parquet.files()
        if not names:
            return 0
        with connect(self.path) as con:
            con.execute(_DDL)
            self._check(con)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('params', ?)", [self._params()])
            con.execute("INSERT OR REPLACE INTO meta VALUES ('hash', ?)", [SHINGLE_HASH])
            have = {r[0] for r in con.execute("SELECT name FROM parquet_files").fetchall()}
            todo = [n for n in names if n not in have]
            for name in todo:
                table = self.parquet.read(name)
                con.register("part", table)
                con.execute("BEGIN")
                if name.startswith("signatures/"):
                    con.execute(
                        "INSERT OR IGNORE INTO signatures SELECT sample_id, batch, dataset, version, sig FROM part"
                    )
                else:
                    con.execute("INSERT INTO bands SELECT band, key, sample_id FROM part")
                con.execute("INSERT INTO parquet_files VALUES (?)", [name])
                con.execute("COMMIT")
                con.unregister("part")
        return len(todo)

    def _params(self) -> str:
        body = {k: v for k, v in self.config.model_dump().items() if k in _PARAMS}
        return json.dumps({**body, "bands": list(self.config.bands)}, sort_keys=True)

    def _check(self, con: object) -> None:
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())  # type: ignore[attr-defined]
        if "params" in meta and meta["params"] != self._params():
            raise ConfigError(
                f"the dedup index at {self.path} was built with {meta['params']}, not {self._params()}; "
                "rebuild it with `ptf datasets reindex` after changing dedup settings"
            )
        indexed = con.execute("SELECT count(*) FROM signatures").fetchall()[0][0]  # type: ignore[attr-defined]
        if indexed and meta.get("hash") != SHINGLE_HASH:
            # its band keys would silently stop matching new rows' (an index from before hashes were
            # recorded used polars' Series.hash, which may change with any polars release)
            built = repr(meta["hash"]) if "hash" in meta else "an unrecorded hash (polars' Series.hash)"
            raise ConfigError(
                f"the dedup index at {self.path} was built with shingle hash {built}, not {SHINGLE_HASH!r}; "
                "rebuild it with `ptf datasets reindex`"
            )

    def count(self) -> int:
        self.sync()
        if not self.path.exists():
            return 0
        with connect(self.path, read_only=True) as con:
            if not con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'signatures'"
            ).fetchall()[0][0]:
                return 0
            return int(con.execute("SELECT count(*) FROM signatures").fetchall()[0][0])

    def missing(self, sample_ids: list[str]) -> list[str]:
        """The ids of ``sample_ids`` not indexed yet (all of them when the index is new): what a new
        version adds, so indexing costs what changed, not the whole version."""
        self.sync()
        if not sample_ids or not self.path.exists():
            return list(sample_ids)
        with connect(self.path, read_only=True) as con:
            if not con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'signatures'"
            ).fetchall()[0][0]:
                return list(sample_ids)
            con.register("incoming", pa.table({"sample_id": pa.array(sample_ids, pa.string())}))
            found = con.execute(
                "SELECT sample_id FROM incoming WHERE sample_id NOT IN (SELECT sample_id FROM signatures)"
            ).fetchall()
        new = {r[0] for r in found}
        return [sid for sid in sample_ids if sid in new]

    def add(
        self,
        sample_ids: list[str],
        sig: np.ndarray,
        dataset: str,
        version: int,
        batches: list[str] | None = None,
    ) -> int:
        """Index these published samples (ones already indexed are skipped); returns how many were new.

        ``batches`` records where each came from: a rerun of that batch must not find itself.
        """
        batches = batches or [""] * len(sample_ids)
        if len(sample_ids) != len(sig):
            raise ValueError(f"{len(sample_ids)} sample ids but {len(sig)} signatures")
        if not sample_ids:
            return 0
        self.sync()
        bands, rows = self.config.bands
        keys = band_keys(sig, bands, rows)
        with connect(self.path) as con:
            con.execute(_DDL)
            self._check(con)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('params', ?)", [self._params()])
            con.execute("INSERT OR REPLACE INTO meta VALUES ('hash', ?)", [SHINGLE_HASH])
            con.execute("INSERT OR REPLACE INTO meta VALUES ('hash_library', ?)", [hash_library()])
            con.register("incoming", pa.table({"sample_id": pa.array(sample_ids, pa.string())}))
            new_ids = {
                r[0]
                for r in con.execute(
                    "SELECT sample_id FROM incoming WHERE sample_id NOT IN (SELECT sample_id FROM signatures)"
                ).fetchall()
            }
            if not new_ids:
                return 0
            mask = np.array([sid in new_ids for sid in sample_ids])
            ids = np.array(sample_ids, dtype=object)[mask]
            fresh = pa.table(
                {
                    "sample_id": pa.array(list(ids), pa.string()),
                    "batch": pa.array([b for b, m in zip(batches, mask, strict=True) if m], pa.string()),
                    "sig": pa.array([s.tobytes() for s in sig[mask]], pa.binary()),
                }
            )
            band_rows = pa.table(
                {
                    "band": pa.array(
                        np.repeat(np.arange(bands, dtype=np.uint16)[None, :], len(ids), axis=0).ravel()
                    ),
                    "key": pa.array(keys[mask].ravel()),
                    "sample_id": pa.array(np.repeat(ids, bands).tolist(), pa.string()),
                }
            )
            written: list[str] = []
            if self.parquet is not None:  # the truth first: a crash after it leaves the cache to catch up
                labelled = fresh.add_column(2, "version", pa.array([version] * len(ids), pa.int32()))
                labelled = labelled.add_column(2, "dataset", pa.array([dataset] * len(ids), pa.string()))
                written = self.parquet.write(labelled, band_rows)
            con.register("fresh", fresh)
            con.register("band_rows", band_rows)
            con.execute("BEGIN")
            for name in written:
                con.execute("INSERT INTO parquet_files VALUES (?)", [name])
            con.execute(
                "INSERT INTO signatures SELECT sample_id, batch, ?, ?, sig FROM fresh", [dataset, version]
            )
            con.execute("INSERT INTO bands SELECT band, key, sample_id FROM band_rows")
            con.execute("COMMIT")
            return len(ids)

    def query(self, sig: np.ndarray, exclude_batch: str | None = None) -> list[tuple[str, float] | None]:
        """For each signature, the most similar indexed sample at or above the threshold, else None.

        Samples published from ``exclude_batch`` are skipped: rerunning a batch finds no duplicates
        in what that same batch published before.
        """
        out: list[tuple[str, float] | None] = [None] * len(sig)
        if len(sig):
            self.sync()
        if not len(sig) or not self.path.exists():
            return out
        bands, rows = self.config.bands
        keys = band_keys(sig, bands, rows)
        probe = pa.table(
            {
                "q": pa.array(np.repeat(np.arange(len(sig), dtype=np.int64), bands)),
                "band": pa.array(np.tile(np.arange(bands, dtype=np.uint16), len(sig))),
                "key": pa.array(keys.ravel()),
            }
        )
        with connect(self.path, read_only=True) as con:
            exists = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'bands'")
            if not exists.fetchall()[0][0]:
                return out
            self._check(con)
            con.register("probe", probe)
            found = con.execute(
                "SELECT DISTINCT p.q, s.sample_id, s.sig FROM probe p JOIN bands b USING (band, key) "
                "JOIN signatures s ON s.sample_id = b.sample_id WHERE s.batch IS DISTINCT FROM ?",
                [exclude_batch],
            ).fetchall()
        if not found:
            return out
        queries = np.array([f[0] for f in found], dtype=np.int64)
        theirs = np.frombuffer(b"".join(f[2] for f in found), dtype=np.uint32).reshape(len(found), -1)
        scores = estimated_jaccard(sig[queries], theirs)
        for (q, sample_id, _), score in zip(found, scores, strict=True):
            if score < self.config.threshold:
                continue
            best = out[q]
            if best is None or score > best[1] or (score == best[1] and sample_id < best[0]):
                out[q] = (sample_id, float(score))
        return out

    def clear(self) -> None:
        with connect(self.path) as con:
            con.execute(_DDL)
            con.execute("DELETE FROM bands")
            con.execute("DELETE FROM signatures")
            con.execute("DELETE FROM meta")
            con.execute("DELETE FROM parquet_files")  # the cache only: the Parquet files are the truth
