"""A delta publish (rows put in and ids taken out over the latest version) makes exactly the version
a full publish of the merged table makes, touching only the buckets the change falls in."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ptfactory.errors import PublishError
from ptfactory.storage.audit import Audit, schema_valid, unique_ids
from ptfactory.storage.manifest import Manifest
from ptfactory.storage.versions import BaseMoved, DatasetStore


def _relabel(table: pa.Table, index: int, batch: str) -> pa.Table:
    values = table.column("batch").to_pylist()
    values[index] = batch
    position = table.schema.get_field_index("batch")
    return table.set_column(position, table.schema.field(position), pa.array(values, pa.string()))


def _without(table: pa.Table, ids: list[str]) -> pa.Table:
    return table.filter(pc.invert(pc.is_in(table.column("sample_id"), value_set=pa.array(ids, pa.string()))))


def _content(manifest: Manifest) -> dict[str, Any]:
    """Everything a version is, less when and by which run it was made."""
    return {
        "rows": manifest.rows,
        "rows_added": manifest.rows_added,
        "rows_removed": manifest.rows_removed,
        "batches": manifest.batches,
        "splits": manifest.splits,
        "buckets": manifest.buckets,
        "shards": [s.to_dict() for s in manifest.shards],
        "stats": manifest.stats,
        "schema": manifest.schema,
        "row_sums": manifest.row_sums,
    }


def _rows_of(store: DatasetStore, ref: str) -> dict[str, list[tuple[str, str]]]:
    manifest = store.resolve(ref)
    out = {}
    for split in manifest.splits:
        table = store.read(ref, split=split, verify=True)
        out[split] = list(
            zip(table.column("sample_id").to_pylist(), table.column("batch").to_pylist(), strict=True)
        )
    return out


def test_a_delta_publish_equals_the_full_publish_of_the_merged_table(
    tmp_path: Path, rows: Callable[..., pa.Table]
) -> None:
    train, validation = rows(90), rows(20, start=500)
    base = {"train": train, "validation": validation}
    audit = Audit([schema_valid, unique_ids])
    full, delta = DatasetStore(str(tmp_path / "full")), DatasetStore(str(tmp_path / "delta"))
    for store in (full, delta):
        store.publish("sft", base, kind="sft", config_hash="c", shard_rows=10, audit=audit)

    relabelled = _relabel(train, 7, "expert").slice(7, 1)  # a new label: same id, new content
    fresh = rows(1, batch="b2", start=900)  # a new row held out
    moved = validation.slice(3, 1)  # a held-out row that now goes to train
    gone = [train.column("sample_id")[40].as_py(), validation.column("sample_id")[11].as_py()]
    upserts = {"train": pa.concat_tables([relabelled, moved]), "validation": fresh}
    merged = {
        "train": pa.concat_tables(
            [_without(train, [*gone, relabelled.column("sample_id")[0].as_py()]), relabelled, moved]
        ),
        "validation": pa.concat_tables(
            [_without(validation, [*gone, moved.column("sample_id")[0].as_py()]), fresh]
        ),
    }
    batches = ["b1", "b2", "expert"]
    by_full = full.publish(
        "sft", merged, kind="sft", config_hash="c", shard_rows=10, batches=batches, audit=audit
    )
    by_delta = delta.publish_delta(
        "sft", upserts, gone, base=1, kind="sft", config_hash="c", shard_rows=10, batches=batches, audit=audit
    )
    assert by_delta.created and by_delta.manifest.version == 2
    assert _content(by_delta.manifest) == _content(by_full.manifest)
    assert by_delta.manifest.rows_added == 1 and by_delta.manifest.rows_removed == 2
    assert _rows_of(delta, "sft@v2") == _rows_of(full, "sft@v2")

    # only the buckets the change fell in were written; the rest are the parent's bytes
    v1_dir, v2_dir = Path(delta.version_dir("sft", 1)), Path(delta.version_dir("sft", 2))
    written = [s.file for s in by_delta.manifest.shards if s.reused_from is None]
    assert 0 < len(written) <= 6 < len(by_delta.manifest.shards)
    for shard in by_delta.manifest.shards:
        if shard.reused_from is not None:
            assert os.stat(v1_dir / shard.file).st_ino == os.stat(v2_dir / shard.file).st_ino
    # the audit looked at the change, relying on the parent's passed checks
    checks = by_delta.manifest.checks
    assert checks["unique_ids"]["passed"] and checks["unique_ids"]["detail"]["checked_rows"] < 40
    assert checks["shards_verified"]["detail"]["read_back"] == len(written)
    assert checks["schema_valid"]["detail"]["checked_rows"] == 3
    # the catalog grew by the rewritten shards' rows
    catalogued = delta.catalog.query("SELECT count(*) FROM samples WHERE version = 2")[0][0]
    assert catalogued == sum(s.rows for s in by_delta.manifest.shards if s.reused_from is None)


def test_one_split_a_removal_only_and_a_no_op(tmp_path: Path, rows: Callable[..., pa.Table]) -> None:
    table = rows(80)
    full, delta = DatasetStore(str(tmp_path / "full")), DatasetStore(str(tmp_path / "delta"))
    for store in (full, delta):
        store.publish("sft", table, kind="sft", config_hash="c", shard_rows=10)
    changed = _relabel(table, 33, "again")
    v2 = delta.publish_delta("sft", changed.slice(33, 1), kind="sft", config_hash="c", shard_rows=10)
    expected = full.publish(
        "sft", changed, kind="sft", config_hash="c", shard_rows=10, batches=["again", "b1"]
    )
    assert _content(v2.manifest) == _content(expected.manifest)  # batches None: those of the rows
    assert [s.file for s in v2.manifest.shards if s.reused_from is None] == ["part-00006.parquet"]

    gone = [table.column("sample_id")[i].as_py() for i in (2, 50)]
    v3 = delta.publish_delta("sft", {}, gone, kind="sft", config_hash="c", shard_rows=10)
    expected = full.publish(
        "sft", _without(changed, gone), kind="sft", config_hash="c", shard_rows=10, batches=["again", "b1"]
    )
    assert _content(v3.manifest) == _content(expected.manifest)
    # the same rows again: nothing to publish
    same = delta.publish_delta("sft", changed.slice(33, 1), kind="sft", config_hash="c", shard_rows=10)
    assert not same.created and same.manifest.version == 3


def test_a_change_that_moves_the_bucket_count_is_published_the_full_way(
    tmp_path: Path, rows: Callable[..., pa.Table]
) -> None:
    first = rows(40)
    full, delta = DatasetStore(str(tmp_path / "full")), DatasetStore(str(tmp_path / "delta"))
    for store in (full, delta):
        store.publish("sft", first, kind="sft", config_hash="c", shard_rows=10)
    more = rows(60, start=1000)
    v2 = delta.publish_delta("sft", more, kind="sft", config_hash="c", shard_rows=10, batches=["b1"])
    expected = full.publish(
        "sft", pa.concat_tables([first, more]), kind="sft", config_hash="c", shard_rows=10, batches=["b1"]
    )
    assert v2.manifest.buckets == {"train": 8}
    assert _content(v2.manifest) == _content(expected.manifest)


def test_bad_changes_are_refused_and_publish_nothing(tmp_path: Path, rows: Callable[..., pa.Table]) -> None:
    store = DatasetStore(str(tmp_path))
    table = rows(20)
    store.publish("sft", table, kind="sft", config_hash="c", shard_rows=10)
    one = table.column("sample_id")[0].as_py()
    with pytest.raises(PublishError, match="both upserted and removed"):
        store.publish_delta("sft", table.slice(0, 1), [one], kind="sft", config_hash="c")
    with pytest.raises(PublishError, match="more than once"):
        store.publish_delta(
            "sft", {"train": table.slice(0, 1), "validation": table.slice(0, 1)}, kind="sft", config_hash="c"
        )
    store.publish_delta(
        "sft", _relabel(table, 0, "x").slice(0, 1), kind="sft", config_hash="c", shard_rows=10
    )
    with pytest.raises(BaseMoved, match="computed over v1 but the latest is v2"):
        store.publish_delta("sft", _relabel(table, 1, "y").slice(1, 1), base=1, kind="sft", config_hash="c")
    assert store.versions("sft") == [1, 2]


def test_a_delta_on_s3_reads_the_touched_buckets_and_copies_the_rest_server_side(
    s3_home: str, tmp_path: Path, rows: Callable[..., pa.Table]
) -> None:
    train, validation = rows(40), rows(10, start=500)
    remote, local = DatasetStore(s3_home), DatasetStore(str(tmp_path / "local"))
    for store in (remote, local):
        store.publish(
            "sft", {"train": train, "validation": validation}, kind="sft", config_hash="c", shard_rows=10
        )
    changed = _relabel(train, 21, "expert")
    made = remote.publish_delta(
        "sft", {"train": changed.slice(21, 1)}, base=1, kind="sft", config_hash="c", shard_rows=10
    )
    expected = local.publish(
        "sft",
        {"train": changed, "validation": validation},
        kind="sft",
        config_hash="c",
        shard_rows=10,
        batches=["b1", "expert"],
    )
    assert _content(made.manifest) == _content(expected.manifest)
    assert [s.reused_from for s in made.manifest.shards].count(None) == 1
    remote.verify("sft@v2")
    assert _rows_of(remote, "sft@v2") == _rows_of(local, "sft@v2")
    assert not remote.store.find(remote.store.path("sft", ".staging"))
