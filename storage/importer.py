"""Bring your own data: a TRL-format table, or one of sample records, as sample records.

``ptf datasets import FILE --name NAME`` reads the file (:func:`read_file`), converts it
(:func:`import_table`) and publishes it as a version. The shape is told by the columns
(:func:`detect_shape`); columns outside the shape are ignored (and named):

====================  =================================================================  ==========
shape                 columns                                                            kind
====================  =================================================================  ==========
``messages``          ``messages``: a conversation ending in the assistant's answer     sft
``prompt-completion`` ``prompt`` (text or messages), ``completion`` (text or assistant)  sft
``preference``        ``prompt`` (text or messages), ``chosen``, ``rejected`` (text or   preference
                      assistant messages); the repo's own ``messages`` + ``chosen`` +
                      ``rejected`` too
``implicit-prompt``   ``chosen``, ``rejected``: whole conversations sharing the prompt   preference
``prompt-answer``     ``prompt`` (text or messages), ``answer`` (the reference answer)   rl
``records``           ``messages`` plus any sample-record column (``sample_id``,          per row
                      ``batch``, ``kind``, ``provenance``, ``scores``, ``decisions``...)
====================  =================================================================  ==========

Every row gets a ``sample_id`` (the content hash; a record's own is kept), a ``batch`` (a record's
own is kept), its ``kind``, ``provenance.method = "import"`` (a record's other provenance is kept;
``seed_task_id`` names the source file and row) and an ``import`` decision naming the source. A bad
row is a :class:`UserInputError` naming its row number (counted from 1: the Nth non-empty line of
a JSONL file); rows with the same sample id are kept once (the first).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.errors import SchemaError, UserInputError
from ptfactory.storage.jsonl import json_objects
from ptfactory.storage.schema import ROLES, SAMPLE_SCHEMA, from_records, sample_id, validate_table
from ptfactory.version import code_version

__all__ = ["DATASET_KINDS", "Shape", "columns_of", "detect_shape", "import_table", "read_file"]

DATASET_KINDS = ("sft", "preference", "rl")
_ROW_KINDS = {"sft": ("sft", "code"), "preference": ("preference",), "rl": ("rl",)}
_RECORD_ONLY = ("sample_id", "batch", "kind", "provenance", "scores", "decisions", "annotation")
_ACCEPTED = (
    "TRL `messages` (sft), `prompt`+`completion` (sft), `prompt`+`chosen`+`rejected` or "
    "`chosen`+`rejected` (preference), `prompt`+`answer` (rl), or sample records (`messages` with "
    "sample_id, batch, kind, ...)"
)


@dataclass(frozen=True)
class Shape:
    name: str  # messages | prompt-completion | preference | implicit-prompt | records
    kind: str | None  # the dataset kind the shape implies; None: the records say
    used: tuple[str, ...]
    ignored: tuple[str, ...]


def columns_of(table: pa.Table | Sequence[Mapping[str, Any]]) -> list[str]:
    """A table's columns; of JSONL rows, every key any row has, in order of first appearance."""
    if isinstance(table, pa.Table):
        return list(table.column_names)
    return list(dict.fromkeys(key for row in table for key in row))


def detect_shape(columns: Sequence[str], source: str = "the table") -> Shape:
    """Which accepted shape ``columns`` fit, or a one-line :class:`UserInputError`."""
    cols = set(columns)

    def shape(name: str, kind: str | None, used: Sequence[str]) -> Shape:
        return Shape(name, kind, tuple(used), tuple(c for c in columns if c not in used))

    if "messages" in cols and cols & set(_RECORD_ONLY):
        return shape("records", None, [c for c in columns if c in SAMPLE_SCHEMA.names])
    if {"chosen", "rejected"} <= cols:
        if "prompt" in cols:
            return shape("preference", "preference", ["prompt", "chosen", "rejected"])
        if "messages" in cols:
            return shape("preference", "preference", ["messages", "chosen", "rejected"])
        return shape("implicit-prompt", "preference", ["chosen", "rejected"])
    if "messages" in cols:
        return shape("messages", "sft", ["messages"])
    if {"prompt", "completion"} <= cols:
        return shape("prompt-completion", "sft", ["prompt", "completion"])
    if {"prompt", "answer"} <= cols:
        return shape("prompt-answer", "rl", ["prompt", "answer"])
    raise UserInputError(
        f"{source} fits no accepted shape: its columns are {', '.join(columns) or 'none'}; accepted: {_ACCEPTED}"
    )


def read_file(path: Path) -> pa.Table | list[dict[str, Any]]:
    """A ``.parquet`` file as a table, a ``.jsonl`` file as its rows (types may differ row to row)."""
    if not path.is_file():
        raise UserInputError(f"{path}: no such file")
    if path.suffix == ".parquet":
        try:
            return pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise UserInputError(f"{path} is not a readable Parquet file: {exc}") from exc
    if path.suffix in (".jsonl", ".ndjson"):
        return [row for _, row in json_objects(path.read_bytes(), str(path))]
    raise UserInputError(f"{path}: import reads .parquet or .jsonl files, not {path.suffix or 'no suffix'!r}")


class _RowError(Exception):
    """A bad value in one row (the caller adds the row number)."""


def _turns(
    value: Any, field: str, *, text_role: str | None = None, only: str | None = None
) -> list[dict[str, str]]:
    """``value`` as a list of {role, content}; a string becomes one ``text_role`` turn where allowed."""
    if isinstance(value, str) and text_role is not None:
        value = [{"role": text_role, "content": value}]
    if value is None or (isinstance(value, (list, tuple)) and not value):
        raise _RowError(f"{field!r} is empty")
    if not isinstance(value, (list, tuple)):
        expected = "text or a list of messages" if text_role else "a list of {role, content} messages"
        raise _RowError(f"{field!r} is a {type(value).__name__}; expected {expected}")
    turns = []
    for index, message in enumerate(value):
        where = f"{field}[{index}]"
        if not isinstance(message, Mapping):
            raise _RowError(f"{where} is not a {{role, content}} message")
        extra = [k for k, v in message.items() if k not in ("role", "content") and v is not None]
        if extra:
            raise _RowError(
                f"{where} has field {extra[0]!r}; a sample record's messages hold role and content only"
            )
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise _RowError(f"{where} has role {role!r}; allowed: {', '.join(ROLES)}")
        if only is not None and role != only:
            raise _RowError(f"{where} has role {role!r}; {field!r} holds {only} messages only")
        if content is not None and not isinstance(content, str):
            raise _RowError(f"{where} ({role}) has content of type {type(content).__name__}; expected text")
        if content is None or not content.strip():
            raise _RowError(f"{where} ({role}) has no content")
        turns.append({"role": role, "content": content})
    return turns


def _ends_with_answer(messages: list[dict[str, str]], kind: str) -> None:
    if messages[-1]["role"] != "assistant":
        raise _RowError(
            f"'messages' ends with a {messages[-1]['role']} turn; an {kind} row ends with the answer"
        )


def _verifiable(fields: Mapping[str, Any]) -> None:
    """An rl row is a prompt a verifier can check: a reference (answer, procedural family or
    constraints) or tests with an entry point."""
    if fields["messages"][-1]["role"] == "assistant":
        raise _RowError("'messages' ends with an assistant turn; an rl row is the prompt, without an answer")
    reference = fields.get("reference") or {}
    has_reference = isinstance(reference, Mapping) and any(
        reference.get(k) for k in ("answer", "family", "constraints")
    )
    if not has_reference and not (fields.get("tests") and fields.get("entry_point")):
        raise _RowError(
            "an rl row needs 'reference' (answer, family or constraints) or 'tests' and 'entry_point'"
        )


def _prompt(value: Any, field: str) -> list[dict[str, str]]:
    turns = _turns(value, field, text_role="user")
    if turns[-1]["role"] == "assistant":
        raise _RowError(f"{field!r} ends with an assistant turn; the prompt ends where the answer starts")
    return turns


def _split_implicit(chosen: Any, rejected: Any) -> tuple[list[dict[str, str]], ...]:
    """TRL's implicit-prompt preference rows: the shared start of both conversations is the prompt."""
    chosen, rejected = _turns(chosen, "chosen"), _turns(rejected, "rejected")
    shared = 0
    while shared < min(len(chosen), len(rejected)) and chosen[shared] == rejected[shared]:
        shared += 1
    while shared and chosen[shared - 1]["role"] == "assistant":
        shared -= 1
    prompt, good, bad = chosen[:shared], chosen[shared:], rejected[shared:]
    if not prompt or not good or not bad:
        raise _RowError("'chosen' and 'rejected' share no prompt turns before their answers")
    for field, turns in (("chosen", good), ("rejected", bad)):
        if any(t["role"] != "assistant" for t in turns):
            raise _RowError(f"{field!r} differs from the other answer before its assistant turns")
    return prompt, good, bad


def _content(row: Mapping[str, Any], shape: Shape) -> tuple[str, dict[str, Any]]:
    """(row kind, content fields) of one row in a TRL shape."""
    if shape.name == "messages":
        messages = _turns(row.get("messages"), "messages")
        _ends_with_answer(messages, "sft")
        return "sft", {"messages": messages}
    if shape.name == "prompt-completion":
        completion = _turns(row.get("completion"), "completion", text_role="assistant", only="assistant")
        return "sft", {"messages": _prompt(row.get("prompt"), "prompt") + completion}
    if shape.name == "prompt-answer":
        answer = row.get("answer")
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            answer = str(answer)
        if not isinstance(answer, str) or not answer.strip():
            raise _RowError("'answer' is empty or not text; an rl row needs the reference answer")
        reference = {"answer": answer.strip(), "source": "column:answer"}
        return "rl", {"messages": _prompt(row.get("prompt"), "prompt"), "reference": reference}
    if shape.name == "implicit-prompt":
        prompt, chosen, rejected = _split_implicit(row.get("chosen"), row.get("rejected"))
    else:
        field = "prompt" if "prompt" in shape.used else "messages"
        prompt = _prompt(row.get(field), field)
        chosen = _turns(row.get("chosen"), "chosen", text_role="assistant", only="assistant")
        rejected = _turns(row.get("rejected"), "rejected", text_role="assistant", only="assistant")
    if chosen == rejected:
        raise _RowError("'chosen' and 'rejected' are the same answer")
    return "preference", {"messages": prompt, "chosen": chosen, "rejected": rejected}


def _record(row: Mapping[str, Any], kind: str | None) -> tuple[str, dict[str, Any]]:
    """(row kind, fields) of a row already in the sample-record shape."""
    fields = {k: v for k, v in row.items() if k in SAMPLE_SCHEMA.names and v is not None}
    fields["messages"] = _turns(row.get("messages"), "messages")
    for name in ("chosen", "rejected"):
        if row.get(name) is not None:
            fields[name] = _turns(row.get(name), name, only="assistant")
    row_kind = fields.get("kind")
    if row_kind is None:
        row_kind = (
            "preference" if "chosen" in fields or kind == "preference" else "rl" if kind == "rl" else "sft"
        )
    if row_kind not in ("sft", "code", "preference", "rl"):
        raise _RowError(f"'kind' is {row_kind!r}; allowed: sft, code, preference, rl")
    if row_kind == "rl":
        _verifiable(fields)
    elif row_kind != "preference":
        _ends_with_answer(fields["messages"], str(row_kind))
    return str(row_kind), fields


def import_table(
    table: pa.Table | Sequence[Mapping[str, Any]],
    kind: str | None,
    source: str,
    *,
    batch: str | None = None,
) -> tuple[pa.Table, str]:
    """Sample records for every row of ``table`` and the dataset kind (``sft`` or ``preference``).

    ``kind`` None infers it from the shape (records: from their ``kind`` and ``chosen`` fields); a
    ``kind`` the rows contradict is an error. ``source`` (the file's name) goes into every row's
    provenance and import decision; ``batch`` defaults to ``import-`` and a hash of the ids.
    """
    if kind is not None and kind not in DATASET_KINDS:
        raise UserInputError(f"--kind {kind!r}: allowed: {', '.join(DATASET_KINDS)}")
    shape = detect_shape(columns_of(table), source)
    if kind is not None and shape.kind is not None and shape.kind != kind:
        raise UserInputError(
            f"{source} has {shape.kind} columns ({', '.join(shape.used)}) but --kind is {kind}; "
            f"leave --kind out or pass --kind {shape.kind}"
        )
    rows = table.to_pylist() if isinstance(table, pa.Table) else table
    dataset_kind = kind or shape.kind
    records: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(rows, 1):
        try:
            row_kind, fields = _record(row, dataset_kind) if shape.kind is None else _content(row, shape)
        except _RowError as exc:
            raise UserInputError(f"{source}, row {number}: {exc}") from None
        wanted = dataset_kind or ("preference" if row_kind == "preference" else "sft")
        if row_kind not in _ROW_KINDS[wanted]:
            raise UserInputError(
                f"{source}, row {number}: a {row_kind} row in a {wanted} import "
                f"({'--kind ' + kind if kind else 'the rows before it are ' + wanted}); import each kind on its own"
            )
        dataset_kind = wanted
        record = _fill(fields, row_kind, source, number)
        records.setdefault(record["sample_id"], record)
    if not records:
        raise UserInputError(f"{source} has no rows to import")
    ids = "\n".join(records)
    default_batch = "import-" + hashlib.blake2b(ids.encode(), digest_size=6).hexdigest()
    for record in records.values():
        record.setdefault("batch", batch or default_batch)
    try:
        converted = from_records(records.values())
        validate_table(converted)
    except SchemaError as exc:
        raise UserInputError(f"{source}: {exc}") from None
    return converted, dataset_kind or "sft"


def _fill(fields: dict[str, Any], kind: str, source: str, number: int) -> dict[str, Any]:
    """Id, kind, provenance and the import decision of one converted row."""
    fields["kind"] = kind
    if not fields.get("sample_id"):
        fields["sample_id"] = sample_id(
            kind,
            fields["messages"],
            chosen=fields.get("chosen"),
            rejected=fields.get("rejected"),
            tests=fields.get("tests"),
            entry_point=fields.get("entry_point"),
        )
    if not fields.get("batch"):
        fields.pop("batch", None)
    given = dict(fields.get("provenance") or {})
    was = given.get("method")
    fields["provenance"] = {
        **given,
        "method": "import",
        "seed_task_id": given.get("seed_task_id") or f"{source}#{number}",
        "code_version": given.get("code_version") or code_version(),
    }
    detail = f"{source} row {number}" + (f"; method was {was}" if was and was != "import" else "")
    decision = {"stage": "import", "verdict": "keep", "reason": "imported", "detail": detail}
    fields["decisions"] = [*(fields.get("decisions") or []), decision]
    return fields
