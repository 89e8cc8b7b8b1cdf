"""What verifiers read, built from a table's columns (``ptf judge``'s flags, a GRPO batch).

Verifiers read sample records (:mod:`~ptfactory.filters.verify.base`); a table that is not one
names its columns: ``--reference-column C`` (the reference answer: a bare answer like ``18`` or a
worked solution ending ``#### 18``), ``--tests-column C`` (tests defining ``check(candidate)``,
HumanEval-style, or top-level asserts, MBPP-style, as text or a list of lines) and
``--entry-point-column C`` (the function they test). A sample-schema table's own ``reference``,
``tests`` and ``entry_point`` columns are read without flags.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ptfactory.errors import UserInputError
from ptfactory.filters.verify.extract import extract, normalize_answer

__all__ = ["reference_answer", "reference_record", "tests_text", "verifier_inputs"]


def reference_answer(text: Any, *, stated: bool = True) -> str | None:
    """The final answer of a reference.

    ``stated=True`` (an ``answer`` field, ``--reference-column``: the user says it is the answer): a
    marked answer inside it (``#### 18``, ``\\boxed{}``, "the answer is") if there is one, else the
    whole value normalised. ``stated=False`` (a seed's free ``response``): only a marked answer, so
    a reply like "Hi!" or "1, 2, 3" never becomes a reference by accident.
    """
    if isinstance(text, bool):  # a yes/no answer (a BoolQ-style label): compared as yes/no
        return "true" if text else "false"
    if text is None:
        return None
    value = str(text).strip()
    if not value:
        return None
    # a worked solution's "#### 85" line is its answer, whatever its working says first ("Each
    # correct answer is worth 2.5 points." is no second answer)
    hashed = re.findall(r"^\s*####\s*(\S[^\n]*)$", value, re.M)
    found = extract(f"#### {hashed[-1]}" if hashed else value, fallback=False)
    if found is not None:
        return found.answer
    return normalize_answer(value) if stated else None


def reference_record(
    *,
    answer: str | None = None,
    source: str | None = None,
    family: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    constraints: list[Any] | None = None,
    working: str | None = None,
) -> dict[str, Any] | None:
    """The ``reference`` struct of the sample schema (None when it would be empty). ``working``: the
    worked solution the answer was read from; equations in it that do not hold go into
    ``metadata.slips`` (the answer verifier then abstains: :mod:`~ptfactory.filters.verify.arithmetic`)."""
    from ptfactory.filters.verify.arithmetic import slips
    from ptfactory.filters.verify.base import canonical_json

    if answer is None and family is None and not constraints:
        return None
    if answer is not None and working and (slipped := slips(working)):
        metadata = {**(metadata or {}), "slips": slipped}
    return {
        "answer": answer,
        "source": source,
        "family": family,
        "metadata": canonical_json(dict(metadata)) if metadata is not None else None,
        "constraints": canonical_json(constraints) if constraints else None,
    }


def _column(table: pa.Table, name: str, flag: str) -> list[Any]:
    if name not in table.column_names:
        raise UserInputError(f"{flag} {name!r}: no such column; columns: {', '.join(table.column_names)}")
    values: list[Any] = table.column(name).to_pylist()
    return values


def _scalar(value: Any) -> Any:
    """A number in a reference column (``18``) as the text it stands for (a boolean stays one:
    :func:`reference_answer` reads it as yes/no)."""
    return json.dumps(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _text(value: Any, flag: str, row: int) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    raise UserInputError(f"row {row}: {flag} holds {type(value).__name__}, not text")


def tests_text(value: Any) -> Any:
    """Tests as one program: a list of assert lines (MBPP's ``test_list``) joined, any other value
    as it is (the caller checks that it is text). Seed files and ``--tests-column`` read tests so."""
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return "\n".join(v.rstrip("\n") for v in value)
    return value


def _tests(value: Any, row: int) -> str | None:
    return _text(tests_text(value), "--tests-column", row)


def verifier_inputs(
    table: pa.Table,
    *,
    reference_column: str | None = None,
    tests_column: str | None = None,
    entry_point_column: str | None = None,
) -> list[dict[str, Any]]:
    """Per row, ``{"reference", "tests", "entry_point"}`` to merge into the row a verifier reads.

    Named columns must exist (else :class:`UserInputError` naming the flag and listing the
    columns); without flags, a sample-schema ``reference`` struct and ``tests``/``entry_point``
    columns are used where the table has them.
    """
    rows = table.num_rows
    nothing: list[Any] = [None] * rows
    if reference_column is not None:
        raw = _column(table, reference_column, "--reference-column")
        references = [
            reference_record(
                answer=reference_answer(_scalar(v)),
                source=f"column:{reference_column}",
                working=v if isinstance(v, str) else None,
            )
            for v in raw
        ]
    elif "reference" in table.column_names and pa.types.is_struct(table.schema.field("reference").type):
        references = table.column("reference").to_pylist()
    else:
        references = nothing
    tests = _column(table, tests_column, "--tests-column") if tests_column else None
    entries = _column(table, entry_point_column, "--entry-point-column") if entry_point_column else None
    if tests is None and "tests" in table.column_names:
        tests = table.column("tests").to_pylist()
    if entries is None and "entry_point" in table.column_names:
        entries = table.column("entry_point").to_pylist()
    out = []
    for i in range(rows):
        out.append(
            {
                "reference": references[i],
                "tests": _tests((tests or nothing)[i], i),
                "entry_point": _text((entries or nothing)[i], "--entry-point-column", i),
            }
        )
    return out
