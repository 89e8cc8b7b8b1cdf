"""Seed tasks: read and validate JSONL or Parquet seed files into sample records.

One task a row: ``instruction`` (required, non-empty text), optional ``id``, ``input``
(context), ``response`` (a reference answer) and ``kind`` (``sft`` default, or ``code``);
``code`` rows also need ``entry_point`` and ``tests`` (Python defining ``check(candidate)``,
HumanEval style, or top-level asserts calling the entry point, MBPP style). What makes an ``sft``
seed verifiable (schema 3's ``reference``, checked by :mod:`ptfactory.filters.verify`):

- ``answer``: the reference's final answer (text, a number or a boolean: ``18``, ``"$16,000"``,
  ``"#### 18"``, ``"\\frac{1}{2}"``, ``true`` for a yes/no question). Without it, a ``response``
  whose final answer is marked (``#### 18``, ``\\boxed{18}``, "the answer is 18") gives the
  reference answer; an unmarked response gives none.
- ``metadata``: a procedural task's generator metadata (an object; reasoning-gym's, with its
  ``source_dataset`` naming an allowed family), kept intact as JSON: the family's scorer reads it.
  ``ptf seeds procedural`` writes such seeds (generators/procedural.py).
- ``constraints``: a list of instruction-following checks (``[{"type": "number_words", "relation":
  "less than", "num_words": 100}, ...]``; the types: filters/verify/constraints.py).

``metadata`` and ``constraints`` may also be JSON text (a Parquet column of strings). Anything else
is a :class:`SeedError` that names the file, line and field, so a bad file never half-loads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.errors import SeedError
from ptfactory.filters.verify.base import canonical_json
from ptfactory.filters.verify.inputs import reference_answer, reference_record, tests_text
from ptfactory.generators.seed_tests import called_entry, check_code_fields
from ptfactory.storage.jsonl import json_objects, type_name
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.version import code_version

__all__ = ["SEED_FIELDS", "SeedTask", "parse_seed", "read_seeds", "seed_files", "seeds_to_table"]

SEED_FIELDS = (
    "id",
    "instruction",
    "input",
    "response",
    "kind",
    "entry_point",
    "tests",
    "answer",
    "metadata",
    "constraints",
)
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
    answer: str | None = None  # as the seed gave it (a procedural oracle's exact text)
    metadata: str | None = None  # canonical JSON: a procedural generator's metadata
    constraints: str | None = None  # canonical JSON: the constraint specs

    @property
    def family(self) -> str | None:
        """The procedural family (reasoning-gym's ``source_dataset``) of a procedural seed."""
        return json.loads(self.metadata)["source_dataset"] if self.metadata else None

    def reference(self) -> dict[str, Any] | None:
        """The ``reference`` struct rows of this seed carry (None: nothing to verify against)."""
        if self.metadata:  # the oracle answer as generated: its scorer compares exact text
            answer, source = self.answer, "procedural"
        elif self.answer is not None:
            answer, source = reference_answer(self.answer), "answer"
        else:
            answer = reference_answer(self.response, stated=False)
            source = "response" if answer is not None else "constraints"
        return reference_record(
            answer=answer,
            source=source,
            family=self.family,
            metadata=json.loads(self.metadata) if self.metadata else None,
            constraints=json.loads(self.constraints) if self.constraints else None,
            working=None if self.metadata else self.response,  # a worked solution whose sums must hold
        )

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
    # a row with tests or an entry point and no kind is a code seed (said outright, sft is an error)
    code_fields = row.get("tests") is not None or row.get("entry_point") is not None
    kind = row.get("kind", "code" if code_fields else "sft")
    if kind not in SEED_KINDS:
        raise SeedError(f"{where}: field 'kind' is {kind!r}; allowed: {', '.join(SEED_KINDS)}")
    raw_id = row.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int | type(None)):
        raise SeedError(f"{where}: field 'id' must be text or an integer, got {type_name(raw_id)}")
    if isinstance(raw_id, str) and not raw_id.strip():
        raise SeedError(f"{where}: field 'id' is empty; remove it or give a non-empty id")
    entry_point = _text(where, row, "entry_point", limit)
    tests = _text(where, {**row, "tests": tests_text(row.get("tests"))}, "tests", limit)
    if kind == "sft" and (entry_point or tests):
        field = "entry_point" if entry_point else "tests"
        raise SeedError(f'{where}: field {field!r} only belongs to code seeds; add "kind": "code"')
    if kind == "code":
        entry_point = entry_point or called_entry(tests)  # MBPP's rows name none: its asserts do
        check_code_fields(where, entry_point, tests)
        for field in ("answer", "metadata", "constraints"):
            if row.get(field) is not None:
                raise SeedError(
                    f"{where}: field {field!r} only belongs to sft seeds; code seeds are checked by their tests"
                )
    task = SeedTask(
        id="",
        instruction=instruction,
        kind=kind,
        source=where,
        input=_text(where, row, "input", limit),
        response=_text(where, row, "response", limit),
        entry_point=entry_point,
        tests=tests,
        answer=_answer(where, row, limit),
        metadata=_metadata(where, row, limit),
        constraints=_constraints(where, row, limit),
    )
    seed_id = str(raw_id) if raw_id is not None else f"seed-{task.sample_id[:12]}"
    return SeedTask(**{**task.__dict__, "id": seed_id})


def _answer(where: str, row: dict[str, Any], limit: int) -> str | None:
    value = row.get("answer")
    if isinstance(value, int | float):  # a boolean too: true/false, a yes/no answer (answer_kinds)
        return json.dumps(value)
    if value is not None and not isinstance(value, str):
        raise SeedError(
            f"{where}: field 'answer' must be text, a number or a boolean, got {type_name(value)}"
        )
    return _text(where, row, "answer", limit)


def _json_field(where: str, row: dict[str, Any], key: str, kind: type, limit: int) -> Any:
    """An object (or list) field, also accepted as JSON text (a Parquet column of strings)."""
    value = row.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise SeedError(f"{where}: field {key!r} is text that is not JSON ({exc})") from None
    if value is None or isinstance(value, kind):
        if value is not None and len(canonical_json(value)) > limit:
            raise SeedError(f"{where}: field {key!r} is over the {limit:,}-character limit as JSON")
        return value
    wanted = "an object" if kind is dict else "a list"
    raise SeedError(f"{where}: field {key!r} must be {wanted}, got {type_name(value)}")


def _metadata(where: str, row: dict[str, Any], limit: int) -> str | None:
    from ptfactory.filters.verify.procedural import family_problem

    metadata = _json_field(where, row, "metadata", dict, limit)
    if metadata is None:
        return None
    family = metadata.get("source_dataset")
    if not isinstance(family, str):
        raise SeedError(
            f"{where}: field 'metadata' has no 'source_dataset' naming its procedural family "
            "(metadata is a procedural generator's, as `ptf seeds procedural` writes it)"
        )
    if problem := family_problem(family):
        raise SeedError(f"{where}: field 'metadata': {problem}")
    return canonical_json(metadata)


def _constraints(where: str, row: dict[str, Any], limit: int) -> str | None:
    from ptfactory.filters.verify.constraints import constraint_problem

    specs = _json_field(where, row, "constraints", list, limit)
    if specs is None:
        return None
    if problem := constraint_problem(specs):
        raise SeedError(f"{where}: field 'constraints': {problem}")
    return canonical_json(specs)


def parse_seed(where: str, row: dict[str, Any], max_field_chars: int = DEFAULT_MAX_FIELD_CHARS) -> SeedTask:
    """One seed row (a dict as a seed file holds it), validated; ``where`` names it in errors."""
    return _to_task(where, row, max_field_chars)


def seeds_to_table(tasks: list[SeedTask], batch: str) -> pa.Table:
    """Seed tasks as sample records of ``batch``; each row's trail starts with the seed decision."""
    version = code_version()
    records = []
    for task in tasks:
        has_reference = task.response is not None
        reference = task.reference()
        records.append(
            {
                "sample_id": task.sample_id,
                "batch": batch,
                "kind": task.kind,
                "messages": task.messages(),
                "tests": task.tests,
                "entry_point": task.entry_point,
                "language": "python" if task.kind == "code" else None,
                "reference": reference,
                "provenance": {
                    "method": "seed",
                    "seed_task_id": task.id,
                    "code_version": version,
                },
                "decisions": [
                    {
                        "stage": "seed",
                        "verdict": "keep",
                        # "verifiable": no reference response, but an answer, procedural task or
                        # constraints a verifier checks responses against
                        "reason": "with_reference"
                        if has_reference
                        else "verifiable"
                        if reference
                        else "instruction_only",
                        # the file's name, not its path: rows must not depend on where a machine keeps them
                        "detail": task.source.rsplit("/", 1)[-1],
                    }
                ],
            }
        )
    return from_records(records)
