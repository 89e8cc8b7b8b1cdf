"""Every text a folder holds, read the way each of its files stores text, for searching planted values.

A plain ``grep -r`` misses what Parquet (zstd pages), DuckDB (compressed strings) and numpy archives
store, so each kind of file is opened with its own reader; every file is also searched as raw bytes
(and as zlib/gzip, if it is that), SQLite's write-ahead logs and Dagster's compute logs included.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

__all__ = ["find_planted", "texts_of"]


def _decoded(data: bytes) -> Iterator[str]:
    yield data.decode("utf-8", errors="ignore")
    for inflate in (zlib.decompress, gzip.decompress):
        try:
            yield inflate(data).decode("utf-8", errors="ignore")
        except Exception:
            continue


def _sqlite(path: Path) -> Iterator[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in con.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes):
                        yield from _decoded(value)
                    elif value is not None:
                        yield str(value)
    finally:
        con.close()


def _duckdb(path: Path) -> Iterator[str]:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()
        for schema, table in tables:
            for row in con.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall():
                yield json.dumps(row, default=str, ensure_ascii=False)
    finally:
        con.close()


def texts_of(path: Path) -> Iterator[str]:
    """The texts ``path`` holds: its raw bytes (as UTF-8, and inflated if it is zlib/gzip), plus
    what its format's reader returns (Parquet rows, SQLite and DuckDB tables, numpy arrays)."""
    data = path.read_bytes()
    yield from _decoded(data)
    if data.startswith(b"PAR1"):
        yield json.dumps(pq.read_table(path).to_pylist(), default=str, ensure_ascii=False)
    elif data.startswith(b"SQLite format 3"):
        yield from _sqlite(path)
    elif path.suffix == ".duckdb" and not path.name.endswith(".wal"):
        yield from _duckdb(path)
    elif path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as arrays:
            for name in arrays.files:
                if arrays[name].dtype.kind in "US":
                    yield "\n".join(str(x) for x in arrays[name].ravel().tolist())


def find_planted(root: Path, values: list[str]) -> dict[str, list[str]]:
    """Planted value -> the files under ``root`` that hold it (every file, read as it stores text)."""
    found: dict[str, list[str]] = {}
    files = sorted(p for p in root.rglob("*") if p.is_file())
    assert files, f"nothing under {root}"
    for file in files:
        for text in texts_of(file):
            for value in values:
                if value in text:
                    found.setdefault(value, []).append(str(file.relative_to(root)))
    return found
