"""``ptf decontaminate``: any table file, or a published version, against the index."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq

from ptfactory.errors import UserInputError
from ptfactory.filters.decontamination.check import Hit, check_texts, sample_texts
from ptfactory.filters.decontamination.index import NgramIndex

__all__ = ["FileResult", "decontaminate_file", "read_table", "recheck_version", "table_texts"]

SUFFIXES = (".parquet", ".jsonl")


@dataclass
class FileResult:
    rows_in: int
    kept: int
    hits: list[tuple[int, Hit]]  # (input row, what it collided with)


def read_table(path: Path) -> pa.Table:
    """A Parquet or JSONL file as a table; anything else is one clear UserInputError."""
    if not path.is_file():
        raise UserInputError(f"{path} does not exist (give a .parquet or .jsonl file, or NAME@vN)")
    if path.suffix not in SUFFIXES:
        raise UserInputError(f"{path}: unsupported file type {path.suffix!r}; use .parquet or .jsonl")
    try:
        return pq.read_table(path) if path.suffix == ".parquet" else pajson.read_json(path)
    except (OSError, pa.ArrowException) as exc:
        kind = "Parquet" if path.suffix == ".parquet" else "JSONL"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserInputError(f"{path}: not a readable {kind} file ({reason})") from None


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _strings(v)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _strings(v)]
    return []


def _has_text(kind: pa.DataType) -> bool:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_text(kind.value_type)
    if pa.types.is_struct(kind):
        return any(_has_text(f.type) for f in kind)
    return False


def table_texts(table: pa.Table, columns: list[str] | None = None) -> list[str]:
    """Each row's text: sample records read as the stage reads them; other tables, the named
    columns (default: every column holding text, nested strings included), joined."""
    if columns is None and "messages" in table.column_names and "sample_id" in table.column_names:
        return sample_texts(table)
    if columns:
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            raise UserInputError(
                f"no column {missing[0]!r} in the table; its columns: {', '.join(table.column_names)}"
            )
    chosen = columns or [f.name for f in table.schema if _has_text(f.type)]
    if not chosen:
        raise UserInputError(
            f"the table has no text column (columns: {', '.join(table.column_names)}); name one with --text-column"
        )
    data = [table.column(c).to_pylist() for c in chosen]
    return ["\n".join(t for col in data for t in _strings(col[i])) for i in range(table.num_rows)]


def _write(table: pa.Table, path: Path) -> None:
    """Atomic: a temp file beside ``path``, renamed over it."""
    if path.suffix not in SUFFIXES:
        raise UserInputError(f"--out {path}: use a .parquet or .jsonl file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if path.suffix == ".parquet":
            pq.write_table(table, temp, compression="zstd")
        else:
            with temp.open("w", encoding="utf-8") as handle:
                for row in table.to_pylist():
                    handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def decontaminate_file(
    source: Path,
    out: Path,
    index: NgramIndex,
    columns: list[str] | None = None,
    dropped: Path | None = None,
) -> FileResult:
    """Write the rows of ``source`` that collide with no benchmark item to ``out`` (same format
    rules: .parquet or .jsonl); with ``dropped``, the colliding rows too, plus ``decont_benchmark``,
    ``decont_item`` and ``decont_ngram``. Bad input raises before anything is written."""
    if out.suffix not in SUFFIXES:
        raise UserInputError(f"--out {out}: use a .parquet or .jsonl file name")
    table = read_table(source)
    hits = check_texts(table_texts(table, columns), index)
    bad = [i for i, h in enumerate(hits) if h]
    keep = pa.array([h is None for h in hits], pa.bool_())
    _write(table.filter(keep), out)
    if dropped is not None:
        picked = table.take(pa.array(bad, pa.int64()))
        found = [hits[i] for i in bad]
        for name, values in (
            ("decont_benchmark", [h.benchmark for h in found if h]),
            ("decont_item", [h.item for h in found if h]),
            ("decont_ngram", [h.ngram for h in found if h]),
        ):
            picked = picked.append_column(name, pa.array(values, pa.string()))
        _write(picked, dropped)
    return FileResult(table.num_rows, table.num_rows - len(bad), [(i, h) for i, h in enumerate(hits) if h])


def recheck_version(store: Any, ref: str, index: NgramIndex) -> tuple[Any, list[tuple[str, Hit]]]:
    """A published version (``storage.versions.DatasetStore``, ``NAME@vN``) against today's index:
    its manifest and the (sample id, hit) of every colliding row."""
    manifest = store.resolve(ref)
    # published shards hold the whole sample record (storage.schema), these columns included
    table = store.read(
        manifest.ref, columns=["sample_id", "messages", "chosen", "rejected", "tests", "steps"]
    )
    hits = check_texts(sample_texts(table), index)
    ids = table.column("sample_id").to_pylist()
    return manifest, [(ids[i], h) for i, h in enumerate(hits) if h]
