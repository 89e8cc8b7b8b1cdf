"""Sample schema 3: ``reference``, ``scores.verifiers`` and kind ``rl``; a schema-2 table (as the
schema-2 code wrote it) conforms with its ids unchanged and publishes beside verifiable rows."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptfactory.errors import SchemaError
from ptfactory.storage.schema import (
    SAMPLE_SCHEMA,
    SCHEMA_VERSION,
    conform,
    from_records,
    sample_id,
    validate_table,
)
from ptfactory.storage.versions import DatasetStore


def schema_2() -> pa.Schema:
    """Schema 2 as its code defined it: no ``reference``, no ``scores.verifiers``."""
    scores = pa.struct([f for f in SAMPLE_SCHEMA.field("scores").type if f.name != "verifiers"])
    fields = [
        f.with_type(scores) if f.name == "scores" else f for f in SAMPLE_SCHEMA if f.name != "reference"
    ]
    return pa.schema(fields, metadata={"ptfactory.schema": "sample/2"})


def rows(n: int = 3) -> list[dict[str, object]]:
    out = []
    for i in range(n):
        messages = [{"role": "user", "content": f"{i} + {i}?"}, {"role": "assistant", "content": f"{2 * i}"}]
        out.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": "b1",
                "kind": "sft",
                "messages": messages,
                "scores": {"judge_mean": 7.0},
                "decisions": [{"stage": "seed", "verdict": "keep", "reason": "test", "detail": None}],
            }
        )
    return out


def test_a_schema_2_table_is_lifted_with_its_ids(tmp_path: Path) -> None:
    path = tmp_path / "v2.parquet"
    pq.write_table(pa.Table.from_pylist(rows(), schema=schema_2()), path)
    old = pq.read_table(path)
    assert old.schema.metadata[b"ptfactory.schema"] == b"sample/2"
    lifted = conform(old)
    validate_table(lifted)
    assert SCHEMA_VERSION == 3 and lifted.schema == SAMPLE_SCHEMA
    assert lifted.column("sample_id").equals(old.column("sample_id"))
    assert lifted.column("reference").null_count == 3
    assert [s["verifiers"] for s in lifted.column("scores").to_pylist()] == [None] * 3
    assert [s["judge_mean"] for s in lifted.column("scores").to_pylist()] == [7.0] * 3  # kept
    assert [sample_id("sft", m) for m in lifted.column("messages").to_pylist()] == old.column(
        "sample_id"
    ).to_pylist()


def test_lifted_schema_2_rows_publish_beside_verifiable_rows_in_schema_3(tmp_path: Path) -> None:
    store = DatasetStore(str(tmp_path))
    old = conform(pa.Table.from_pylist(rows(2), schema=schema_2()))
    reference = {"answer": "18", "source": "answer", "family": None, "metadata": None, "constraints": None}
    verifiable = from_records([{**rows(3)[2], "reference": reference}])
    store.publish("math", pa.concat_tables([old, verifiable]), kind="sft", config_hash="v3")
    read = store.read("math@v1")
    assert read.schema.metadata[b"ptfactory.schema"] == b"sample/3"
    by_id = dict(zip(read.column("sample_id").to_pylist(), read.column("reference").to_pylist(), strict=True))
    assert by_id[verifiable.column("sample_id")[0].as_py()]["answer"] == "18"
    assert [by_id[i] for i in old.column("sample_id").to_pylist()] == [None, None]


def test_rl_rows_and_verifier_votes_validate() -> None:
    vote = {
        "verifier": "answer",
        "kind": "answer",
        "verdict": "fail",
        "reason": "wrong_answer",
        "score": 0.0,
        "partial": None,
        "final": True,
        "evidence": json.dumps({"extracted": "384", "expected": "18"}),
    }
    row = {**rows(1)[0], "kind": "rl", "scores": {"verifiers": [vote]}}
    validate_table(from_records([row]))
    with pytest.raises(SchemaError, match="verdict 'wrong'"):
        validate_table(from_records([{**row, "scores": {"verifiers": [{**vote, "verdict": "wrong"}]}}]))
