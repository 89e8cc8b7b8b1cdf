"""Seed tasks: read and validate JSONL or Parquet seed files into sample records.

One task a row: ``instruction`` (required, non-empty text), optional ``id``, ``input``
(context), ``response`` (a reference answer) and ``kind`` (``sft`` default, or ``code``);
``code`` rows also need ``entry_point`` and ``tests`` (Python defining
``check(candidate)``, HumanEval style). Anything else is a :class:`SeedError` that
names the file, line and field, so a bad file never half-loads.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.errors import SeedError
from ptfactory.storage.jsonl import json_objects, type_name
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.version import code_version

__all__ = ["SEED_FIELDS", "SeedTask", "read_seeds", "seed_files", "seeds_to_table"]

SEED_FIELDS = ("id", "instruction", "input", "response", "kind", "entry_point", "tests")
SEED_KINDS = ("sft", "code")
SUFFIXES = (".jsonl", ".parquet")
DEFAULT_MAX_FIELD_CHARS = 100_000


@dataclass(frozen=True)
class SeedTask:
    id: str
    instruction: str
    kind: str
    source: str  # "file:line" for messages
    input: str | None = None
    response: str | None = None
    entry_point: str | None = None
    tests: str | None = None

    @property
    def prompt(self) -> str:
        return f"{self.instruction}\n\n{self.input}" if self.input else self.instruction

    def messages(self) -> list[dict[str, str]]:
        turns = [{"role": "user", "content": self.prompt}]
        if self.response is not None:
            turns.append({"role": "assistant", "content": self.response})
        return turns

    @property
    def sample_id(self) -> str:
        return sample_id(self.kind, self.messages(), tests=self.tests, entry_point=self.entry_point)


def seed_files(path: Path) -> list[Path]:
    """The seed files at ``path``: the file itself, or every .jsonl/.parquet in a directory."""
    if not path.exists():
        raise SeedError(f"seed path {path} does not exist")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
        if not files:
            raise SeedError(f"seed directory {path} holds no .jsonl or .parquet files")
        return files
    if path.suffix not in SUFFIXES:
        raise SeedError(f"{path}: unsupported seed file type {path.suffix!r}; use .jsonl or .parquet")
    return [path]


def read_seeds(path: Path, max_field_chars: int = DEFAULT_MAX_FIELD_CHARS) -> list[SeedTask]:
    """Every seed task under ``path``, validated; raises :class:`SeedError` on the first problem."""
    tasks: list[SeedTask] = []
    seen_ids: dict[str, str] = {}
    seen_content: dict[str, str] = {}
    for file in seed_files(path):
        rows = _jsonl_rows(file) if file.suffix == ".jsonl" else _parquet_rows(file)
        for where, row in rows:
            task = _to_task(where, row, max_field_chars)
            sid = task.sample_id
            if sid in seen_content:
                raise SeedError(
                    f"{where}: duplicate seed: same content as {seen_content[sid]}; remove one of them"
                )
            if task.id in seen_ids:
                raise SeedError(f"{where}: duplicate seed id {task.id!r} (first at {seen_ids[task.id]})")
            seen_ids[task.id] = where
            seen_content[sid] = where
            tasks.append(task)
    if not tasks:
        raise SeedError(f"{path} holds no seed tasks")
    return tasks


def _jsonl_rows(file: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    return json_objects(file.read_bytes(), str(file), SeedError)


def _parquet_rows(file: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        table = pq.read_table(file)
    except (pa.ArrowException, OSError) as exc:
        raise SeedError(f"{file}: not a readable Parquet file ({exc})") from None
    unknown = [c for c in table.column_names if c not in SEED_FIELDS]
    if unknown:
        raise SeedError(f"{file}: unknown column {unknown[0]!r}; allowed: {', '.join(SEED_FIELDS)}")
    for number, row in enumerate(table.to_pylist(), start=1):
        where = f"{file}: row {number}"
        for key, value in row.items():
            if isinstance(value, bytes):
                try:
                    row[key] = value.decode("utf-8")
                except UnicodeDecodeError:
                    raise SeedError(f"{where}: field {key!r} is not valid UTF-8 text") from None
        yield where, {k: v for k, v in row.items() if v is not None}


def _text(where: str, row: dict[str, Any], key: str, limit: int, required: bool = False) -> str | None:
    value = row.get(key)
    if value is None:
        if required:
            raise SeedError(f"{where}: field {key!r} is missing; every seed needs a non-empty {key!r}")
        return None
    if not isinstance(value, str):
        raise SeedError(f"{where}: field {key!r} must be text, got {type_name(value)}")
    if len(value) > limit:
        raise SeedError(
            f"{where}: field {key!r} is {len(value):,} characters, over the {limit:,} limit "
            "(raise seeds.max_field_chars in factory.yaml if this is intended)"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SeedError(f"{where}: field {key!r} holds an unpaired surrogate (\\ud8xx escape)") from None
    if not value.strip():
        if required:
            raise SeedError(f"{where}: field {key!r} is empty; every seed needs a non-empty {key!r}")
        return None  # empty optional context (Alpaca's "input": "") means no context
    return value


def _to_task(where: str, row: dict[str, Any], limit: int) -> SeedTask:
    unknown = [k for k in row if k not in SEED_FIELDS]
    if unknown:
        raise SeedError(f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(SEED_FIELDS)}")
    instruction = _text(where, row, "instruction", limit, required=True)
    assert instruction is not None
    kind = row.get("kind", "sft")
    if kind not in SEED_KINDS:
        raise SeedError(f"{where}: field 'kind' is {kind!r}; allowed: {', '.join(SEED_KINDS)}")
    raw_id = row.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int | type(None)):
        raise SeedError(f"{where}: field 'id' must be text or an integer, got {type_name(raw_id)}")
    if isinstance(raw_id, str) and not raw_id.strip():
        raise SeedError(f"{where}: field 'id' is empty; remove it or give a non-empty id")
    entry_point = _text(where, row, "entry_point", limit)
    tests = _text(where, row, "tests", limit)
    if kind == "sft" and (entry_point or tests):
        field = "entry_point" if entry_point else "tests"
        raise SeedError(f'{where}: field {field!r} only belongs to code seeds; add "kind": "code"')
    if kind == "code":
        _check_code_fields(where, entry_point, tests)
    task = SeedTask(
        id="",
        instruction=instruction,
        kind=kind,
        source=where,
        input=_text(where, row, "input", limit),
        response=_text(where, row, "response", limit),
        entry_point=entry_point,
        tests=tests,
    )
    seed_id = str(raw_id) if raw_id is not None else f"seed-{task.sample_id[:12]}"
    return SeedTask(**{**task.__dict__, "id": seed_id})


def _check_code_fields(where: str, entry_point: str | None, tests: str | None) -> None:
    if entry_point is None:
        raise SeedError(f"{where}: field 'entry_point' is missing; code seeds name the function to test")
    if not entry_point.isidentifier():
        raise SeedError(f"{where}: field 'entry_point' is {entry_point!r}, not a Python function name")
    if tests is None:
        raise SeedError(f"{where}: field 'tests' is missing; code seeds need tests defining check(candidate)")
    try:
        tree = ast.parse(tests)  # parsing only: seed code is never executed outside the sandbox
    except SyntaxError as exc:
        raise SeedError(
            f"{where}: field 'tests' is not valid Python ({exc.msg}, line {exc.lineno})"
        ) from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body):
        raise SeedError(f"{where}: field 'tests' does not define check(candidate)")


def seeds_to_table(tasks: list[SeedTask], batch: str) -> pa.Table:
    """Seed tasks as sample records of ``batch``; each row's trail starts with the seed decision."""
    version = code_version()
    records = []
    for task in tasks:
        has_reference = task.response is not None
        records.append(
            {
                "sample_id": task.sample_id,
                "batch": batch,
                "kind": task.kind,
                "messages": task.messages(),
                "tests": task.tests,
                "entry_point": task.entry_point,
                "language": "python" if task.kind == "code" else None,
                "provenance": {
                    "method": "seed",
                    "seed_task_id": task.id,
                    "code_version": version,
                },
                "decisions": [
                    {
                        "stage": "seed",
                        "verdict": "keep",
                        "reason": "with_reference" if has_reference else "instruction_only",
                        # the file's name, not its path: rows must not depend on where a machine keeps them
                        "detail": task.source.rsplit("/", 1)[-1],
                    }
                ],
            }
        )
    return from_records(records)
