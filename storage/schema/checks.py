"""Building, conforming and validating tables of sample records (vectorised; errors name the row)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.errors import SchemaError
from ptfactory.storage.schema.record import KINDS, ROLES, SAMPLE_SCHEMA, VERDICTS, VERIFIER_OUTCOMES

__all__ = ["conform", "empty_table", "from_records", "validate_table"]


def empty_table() -> pa.Table:
    return SAMPLE_SCHEMA.empty_table()


def from_records(records: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Build a schema-conformant table from dicts; missing optional fields become null."""
    rows = [dict(r) for r in records]
    for row in rows:
        row.setdefault("decisions", [])
    try:
        return pa.Table.from_pylist(rows, schema=SAMPLE_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError, TypeError) as exc:
        raise SchemaError(f"records do not fit the sample schema: {exc}") from exc


def conform(table: pa.Table) -> pa.Table:
    """Return ``table`` with the sample schema's columns in order, adding missing optional ones as null.

    Extra columns are an error: they would silently vanish from a published version.
    """
    extra = [name for name in table.column_names if name not in SAMPLE_SCHEMA.names]
    if extra:
        raise SchemaError(
            f"column {extra[0]!r} is not part of the sample schema; allowed columns: "
            f"{', '.join(SAMPLE_SCHEMA.names)}"
        )
    columns = []
    for field in SAMPLE_SCHEMA:
        if field.name in table.column_names:
            column = table.column(field.name)
            if column.type != field.type:
                try:
                    column = column.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise SchemaError(
                        f"column {field.name!r} has type {column.type}, expected {field.type}"
                    ) from exc
            columns.append(column)
        elif field.nullable:
            columns.append(pa.nulls(table.num_rows, field.type))
        else:
            raise SchemaError(f"required column {field.name!r} is missing")
    return pa.Table.from_arrays(columns, schema=SAMPLE_SCHEMA)


def _first_true(mask: pa.ChunkedArray | pa.Array) -> int | None:
    filled = pc.fill_null(mask, False)
    if not pc.any(filled).as_py():
        return None
    return int(pc.index(filled, True).as_py())


def _row_label(table: pa.Table, row: int) -> str:
    sid = table.column("sample_id")[row].as_py()
    return f"row {row} (sample_id {sid})" if sid else f"row {row}"


def _row_of_element(list_column: pa.ChunkedArray, element: int) -> int:
    """The row holding flattened element ``element``; only called on the (rare) failure path,
    because combining chunks copies the whole column."""
    return int(pc.list_parent_indices(list_column.combine_chunks())[element].as_py())


def validate_table(table: pa.Table) -> None:
    """Raise :class:`SchemaError` naming the first bad row and field; return None if the table is valid.

    Vectorised: a million rows validate in about a second.
    """
    for field in SAMPLE_SCHEMA:
        if field.name not in table.column_names:
            raise SchemaError(f"column {field.name!r} is missing (expected sample schema {field.type})")
        actual = table.schema.field(field.name).type
        if actual != field.type:
            raise SchemaError(f"column {field.name!r} has type {actual}, expected {field.type}")
    extra = [n for n in table.column_names if n not in SAMPLE_SCHEMA.names]
    if extra:
        raise SchemaError(f"column {extra[0]!r} is not part of the sample schema")
    if table.num_rows == 0:
        return

    def fail(row: int, message: str) -> None:
        raise SchemaError(f"{_row_label(table, row)}: {message}")

    for name in ("sample_id", "batch"):
        column = table.column(name)
        bad = _first_true(pc.or_kleene(pc.is_null(column), pc.equal(pc.utf8_length(column), 0)))
        if bad is not None:
            fail(bad, f"field {name!r} is empty; every row needs a non-empty {name}")

    kind = table.column("kind")
    bad = _first_true(pc.invert(pc.is_in(kind, value_set=pa.array(KINDS))))
    if bad is not None:
        fail(bad, f"field 'kind' is {kind[bad].as_py()!r}; allowed: {', '.join(KINDS)}")

    messages = table.column("messages")
    bad = _first_true(pc.or_kleene(pc.is_null(messages), pc.equal(pc.list_value_length(messages), 0)))
    if bad is not None:
        fail(bad, "field 'messages' is empty; a sample needs at least one user turn")
    for name in ("messages", "chosen", "rejected"):
        _validate_turns(table, name, fail)

    is_pref = pc.equal(kind, "preference")
    for name in ("chosen", "rejected"):
        column = table.column(name)
        missing = pc.and_kleene(
            is_pref, pc.or_kleene(pc.is_null(column), pc.equal(pc.list_value_length(column), 0))
        )
        bad = _first_true(missing)
        if bad is not None:
            fail(bad, f"field {name!r} is empty; preference rows need both 'chosen' and 'rejected'")

    is_code = pc.equal(kind, "code")
    for name in ("tests", "entry_point"):
        column = table.column(name)
        missing = pc.and_kleene(
            is_code, pc.or_kleene(pc.is_null(column), pc.equal(pc.utf8_length(column), 0))
        )
        bad = _first_true(missing)
        if bad is not None:
            fail(bad, f"field {name!r} is empty; code rows need 'tests' and 'entry_point'")

    _validate_agent(table, kind, fail)

    decisions = table.column("decisions")
    flat = pc.list_flatten(decisions)
    if len(flat):
        verdict = pc.struct_field(flat, "verdict")
        bad_el = _first_true(pc.invert(pc.is_in(verdict, value_set=pa.array(VERDICTS))))
        if bad_el is not None:
            row = _row_of_element(decisions, bad_el)
            fail(row, f"decision verdict {verdict[bad_el].as_py()!r}; allowed: {', '.join(VERDICTS)}")
        for sub in ("stage", "reason"):
            values = pc.struct_field(flat, sub)
            bad_el = _first_true(pc.or_kleene(pc.is_null(values), pc.equal(pc.utf8_length(values), 0)))
            if bad_el is not None:
                row = _row_of_element(decisions, bad_el)
                fail(
                    row,
                    f"a decision has an empty {sub!r}; every decision names its stage and reason",
                )

    _validate_verifiers(table, fail)

    ids = table.column("sample_id")
    if pc.count_distinct(ids).as_py() != table.num_rows:
        counts = pc.value_counts(ids)
        dup = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))[0].as_py()
        first = int(pc.index(ids, dup).as_py())
        fail(first, f"sample_id {dup} appears more than once; sample ids must be unique in a table")


def _validate_turns(table: pa.Table, name: str, fail: Any) -> None:
    column = table.column(name)
    if column.null_count == len(column):
        return
    flat = pc.list_flatten(column)
    if not len(flat):
        return
    roles = pc.struct_field(flat, "role")
    bad_el = _first_true(pc.invert(pc.is_in(roles, value_set=pa.array(ROLES))))
    if bad_el is not None:
        row = _row_of_element(column, bad_el)
        fail(row, f"field '{name}' has role {roles[bad_el].as_py()!r}; allowed: {', '.join(ROLES)}")
    content = pc.struct_field(flat, "content")
    bad_el = _first_true(pc.is_null(content))
    if bad_el is not None:
        row = _row_of_element(column, bad_el)
        fail(row, f"field '{name}' has a turn with no content")
    answers = pc.struct_field(flat, "tool_call_id")
    orphan = pc.and_kleene(
        pc.equal(roles, "tool"), pc.or_kleene(pc.is_null(answers), pc.equal(pc.utf8_length(answers), 0))
    )
    bad_el = _first_true(orphan)
    if bad_el is not None:
        row = _row_of_element(column, bad_el)
        fail(row, f"field '{name}' has a tool turn with no 'tool_call_id'; it must name the call it answers")


def _validate_agent(table: pa.Table, kind: pa.ChunkedArray, fail: Any) -> None:
    """Agent rows offer tools and say how the episode ended; step labels point at real steps."""
    is_agent = pc.equal(kind, "agent")
    tools = table.column("tools")
    bad = _first_true(
        pc.and_kleene(is_agent, pc.or_kleene(pc.is_null(tools), pc.equal(pc.utf8_length(tools), 0)))
    )
    if bad is not None:
        fail(bad, "field 'tools' is empty; agent rows need the tool specs they were offered")
    bad = _first_true(pc.and_kleene(is_agent, pc.is_null(table.column("outcome"))))
    if bad is not None:
        fail(bad, "field 'outcome' is empty; agent rows need their episode's outcome")
    labels = table.column("step_labels")
    flat = pc.list_flatten(labels)
    if not len(flat):
        return
    parents = pc.list_parent_indices(labels)
    steps = pc.take(pc.fill_null(pc.list_value_length(table.column("steps")), 0), parents)
    step = pc.struct_field(flat, "step")
    label = pc.struct_field(flat, "label")
    bad_el = _first_true(
        pc.or_kleene(
            pc.or_kleene(pc.is_null(step), pc.less(step, 0)),
            pc.or_kleene(pc.greater_equal(step, steps), pc.equal(pc.fill_null(pc.utf8_length(label), 0), 0)),
        )
    )
    if bad_el is not None:
        row = _row_of_element(labels, bad_el)
        fail(
            row,
            f"step label {flat[bad_el].as_py()} names no step of the row or has no label; "
            f"steps are 0..{steps[bad_el].as_py() - 1}",
        )


def _validate_verifiers(table: pa.Table, fail: Any) -> None:
    """Schema 3: each ``scores.verifiers`` vote names its verifier and has a known verdict."""
    scores = table.column("scores")
    if scores.null_count == len(scores):
        return
    votes = pc.struct_field(scores, "verifiers")
    flat = pc.list_flatten(votes)
    if not len(flat):
        return
    verdict = pc.struct_field(flat, "verdict")
    bad_el = _first_true(pc.invert(pc.is_in(verdict, value_set=pa.array(VERIFIER_OUTCOMES))))
    if bad_el is None:
        names = pc.struct_field(flat, "verifier")
        bad_el = _first_true(pc.or_kleene(pc.is_null(names), pc.equal(pc.utf8_length(names), 0)))
    if bad_el is not None:
        row = _row_of_element(votes, bad_el)
        fail(
            row,
            f"verifier vote {flat[bad_el].as_py()['verifier']!r} has verdict {verdict[bad_el].as_py()!r}; "
            f"every vote names its verifier and a verdict among {', '.join(VERIFIER_OUTCOMES)}",
        )
