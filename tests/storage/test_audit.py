"""Write–audit–publish on the version store: checks run on the staged shards, and a failing
blocking check leaves no version, no alias and no staged file behind."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.audit import (
    Audit,
    CheckResult,
    Staged,
    batches_passed,
    checks_metadata,
    schema_valid,
    unique_ids,
)
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.versions import AuditFailed, DatasetStore


def _rows(n: int, batch: str = "b1") -> pa.Table:
    records = []
    for i in range(n):
        messages = [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
        records.append(
            {"sample_id": sample_id("sft", messages), "batch": batch, "kind": "sft", "messages": messages}
        )
    return from_records(records)


def _refuse_row_3(staged: Staged) -> CheckResult:
    bad = [
        i
        for i in staged.table.column("sample_id").to_pylist()
        if i == staged.table.column("sample_id")[3].as_py()
    ]
    return CheckResult("no_row_three", False, detail={"why": "row three is bad"}, rows=tuple(bad))


def test_a_failing_blocking_check_publishes_nothing(tmp_path: Path) -> None:
    store = DatasetStore(str(tmp_path))
    audit = Audit([schema_valid, unique_ids, _refuse_row_3])
    with pytest.raises(AuditFailed) as refused:
        store.publish("sft", _rows(6), kind="sft", config_hash="c", audit=audit)
    message = str(refused.value)
    assert "no_row_three" in message and "row three is bad" in message
    assert refused.value.failed[0].rows  # which rows
    assert {r.name for r in refused.value.results} == {
        "shards_verified",
        "schema_valid",
        "unique_ids",
        "no_row_three",
    }
    assert store.versions("sft") == [] and store.aliases("sft") == {}
    leftovers = [f for _, _, files in os.walk(tmp_path / "datasets") for f in files if f.endswith(".parquet")]
    assert leftovers == []
    # a later good publish is v1, not v2: the refused attempt took no version number
    published = store.publish(
        "sft", _rows(6), kind="sft", config_hash="c", audit=Audit([schema_valid, unique_ids])
    )
    assert published.manifest.version == 1


def test_passed_and_advisory_checks_are_kept_in_the_manifest(tmp_path: Path) -> None:
    store = DatasetStore(str(tmp_path))

    def advisory(staged: Staged) -> CheckResult:
        return CheckResult("advisory", False, blocking=False, detail={"rows": staged.table.num_rows})

    result = store.publish(
        "sft", _rows(4), kind="sft", config_hash="c", audit=Audit([schema_valid, advisory])
    )
    checks = store.resolve("sft@latest").checks
    assert result.created
    assert checks["shards_verified"]["passed"] and checks["shards_verified"]["detail"]["shards"] == 1
    assert checks["schema_valid"]["passed"]
    assert checks["advisory"] == {"passed": False, "blocking": False, "detail": {"rows": 4}, "rows": []}


def test_a_check_that_raises_counts_as_failed(tmp_path: Path) -> None:
    def broken(staged: Staged) -> CheckResult:
        raise RuntimeError("tokenizer missing")

    with pytest.raises(AuditFailed, match="tokenizer missing"):
        DatasetStore(str(tmp_path)).publish(
            "sft", _rows(2), kind="sft", config_hash="c", audit=Audit([broken])
        )


def test_unique_ids_names_the_repeated_id() -> None:
    table = _rows(3)
    twice = pa.concat_tables([table, table.slice(1, 1)])
    result = unique_ids(Staged("sft", 1, "sft", ("b1",), {"train": twice}))
    assert not result.passed and result.rows == (table.column("sample_id")[1].as_py(),)


def test_batches_must_have_passed_their_judged_checks(tmp_path: Path) -> None:
    assets = AssetStore(str(tmp_path))
    ok = _rows(2, "b1")
    bad = _rows(2, "b2")
    assets.write(
        "judged_samples",
        ok.replace_schema_metadata(checks_metadata({"j_schema_valid": True, "j_counted": False})),
        "b1",
    )
    assets.write(
        "judged_samples", bad.replace_schema_metadata(checks_metadata({"j_schema_valid": False})), "b2"
    )
    assets.write("judged_samples", _rows(1, "b3"), "b3")  # written before outcomes were kept
    assert assets.recorded_checks("judged_samples", "b1") == {"j_counted": False, "j_schema_valid": True}
    assert assets.recorded_checks("judged_samples", "b3") is None
    check = batches_passed(
        "judged", lambda b: assets.recorded_checks("judged_samples", b), ["j_schema_valid"]
    )

    def staged(*batches: str) -> Staged:
        return Staged("sft", 1, "sft", batches, {"train": _rows(1)})

    # a judge left out for counting too few votes (j_counted) does not stop publishing
    assert check(staged("b1", "b3")).passed
    assert check(staged("b1", "b3")).detail["not_recorded"] == "b3"
    failed = check(staged("b1", "b2"))
    assert not failed.passed and failed.detail["failed"] == "b2: j_schema_valid"
