from collections.abc import Callable

import pyarrow as pa
import pytest

from ptfactory.errors import SchemaError
from ptfactory.storage.schema import (
    SAMPLE_SCHEMA,
    add_decision,
    conform,
    dropped_mask,
    from_records,
    sample_id,
    validate_table,
)

USER = [{"role": "user", "content": "hi"}]


def test_sample_id_is_a_stable_content_hash() -> None:
    turns = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    # Pinned: a change here silently re-keys every published sample.
    assert sample_id("sft", turns) == "cdfef88caac6536e1ad50e8ef491a67a"
    assert sample_id("sft", turns) == sample_id("sft", [dict(t) for t in turns])
    assert sample_id("code", turns) != sample_id("sft", turns)
    assert sample_id("sft", turns, tests="x") != sample_id("sft", turns)
    assert len(sample_id("sft", USER)) == 32


def test_valid_table_passes(rows: Callable[..., pa.Table]) -> None:
    validate_table(rows(50))


def _with(table: pa.Table, row: int, **changes: object) -> pa.Table:
    records = table.to_pylist()
    records[row].update(changes)
    return pa.Table.from_pylist(records, schema=SAMPLE_SCHEMA)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"kind": "chat"},
            r"row 3 \(sample_id \w+\): field 'kind' is 'chat'; allowed: sft, preference, code",
        ),
        ({"batch": ""}, "row 3 .*field 'batch' is empty"),
        ({"messages": []}, "row 3 .*field 'messages' is empty"),
        (
            {"messages": [{"role": "bot", "content": "x"}]},
            "row 3 .*role 'bot'; allowed: system, user, assistant",
        ),
        ({"messages": [{"role": "user", "content": None}]}, "row 3 .*turn with no content"),
        ({"kind": "preference"}, "row 3 .*field 'chosen' is empty; preference rows need"),
        ({"kind": "code"}, "row 3 .*field 'tests' is empty; code rows need"),
        ({"decisions": [{"stage": "x", "verdict": "maybe", "reason": "r"}]}, "row 3 .*verdict 'maybe'"),
        ({"decisions": [{"stage": "x", "verdict": "keep", "reason": ""}]}, "row 3 .*empty 'reason'"),
    ],
)
def test_validator_names_first_bad_row_and_field(
    rows: Callable[..., pa.Table], changes: dict[str, object], message: str
) -> None:
    table = _with(rows(6), 3, **changes)
    table = _with(table, 5, **changes)  # a later bad row must not be the one reported
    with pytest.raises(SchemaError, match=message):
        validate_table(table)


def test_validator_reports_duplicate_ids(rows: Callable[..., pa.Table]) -> None:
    table = rows(3)
    table = pa.concat_tables([table, table.slice(1, 1)])
    with pytest.raises(SchemaError, match=r"row 1 .*appears more than once"):
        validate_table(table)


def test_validator_reports_missing_and_mistyped_columns(rows: Callable[..., pa.Table]) -> None:
    table = rows(2)
    with pytest.raises(SchemaError, match="column 'kind' is missing"):
        validate_table(table.drop_columns(["kind"]))
    bad = table.set_column(2, "kind", pa.array([1, 2]))
    with pytest.raises(SchemaError, match="column 'kind' has type int64, expected string"):
        validate_table(bad)


def test_conform_fills_optional_columns_and_rejects_extras(rows: Callable[..., pa.Table]) -> None:
    table = rows(2).select(["sample_id", "batch", "kind", "messages", "decisions"])
    full = conform(table)
    assert full.schema == SAMPLE_SCHEMA
    assert full.column("tests").null_count == 2
    with pytest.raises(SchemaError, match="column 'extra' is not part of the sample schema"):
        conform(table.append_column("extra", pa.array([1, 2])))


def test_from_records_rejects_unknown_shapes() -> None:
    with pytest.raises(SchemaError, match="do not fit the sample schema"):
        from_records([{"sample_id": "a", "batch": "b", "kind": "sft", "messages": "not a list"}])


def test_decisions_trail_and_dropped_mask(rows: Callable[..., pa.Table]) -> None:
    table = rows(3)
    table = add_decision(
        table,
        "dedup",
        ["keep", "drop", "keep"],
        ["unique", "near_duplicate", "unique"],
        [None, "of abc", None],
    )
    assert dropped_mask(table).to_pylist() == [False, True, False]
    trail = table.column("decisions")[1].as_py()
    assert [d["stage"] for d in trail] == ["seed", "dedup"]
    assert trail[-1] == {"stage": "dedup", "verdict": "drop", "reason": "near_duplicate", "detail": "of abc"}
    with pytest.raises(SchemaError, match="got 1 verdicts"):
        add_decision(table, "x", ["keep"], ["r"])


def test_validation_is_vectorised_enough_for_large_tables(rows: Callable[..., pa.Table]) -> None:
    big = pa.concat_tables([rows(1000, start=i * 1000) for i in range(20)])
    validate_table(big)  # 20k rows; a per-row Python loop here would make publishing crawl
    assert big.num_rows == 20_000
