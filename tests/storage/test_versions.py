import json
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptfactory.errors import DatasetRefError, PublishError, SchemaError
from ptfactory.storage.versions import DatasetStore, parse_ref


def _publish(store: DatasetStore, table: pa.Table, **kw: object) -> object:
    args: dict[str, object] = {"kind": "sft", "config_hash": "cfg1", "batches": ["b1"]}
    args.update(kw)
    return store.publish("sft", table, **args)  # type: ignore[arg-type]


def test_publish_writes_manifest_card_and_shards(home: Path, rows: Callable[..., pa.Table]) -> None:
    store = DatasetStore()
    result = _publish(store, rows(25), shard_rows=10, dagster_run_id="run-1")
    assert result.created  # type: ignore[attr-defined]
    version_dir = home / "datasets" / "sft" / "v1"
    files = sorted(p.name for p in version_dir.iterdir())
    assert files == [
        "README.md",
        "manifest.json",
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
        "part-00003.parquet",
    ]  # 25 rows at 10 a shard: 4 buckets of a hash of sample_id
    manifest = json.loads((version_dir / "manifest.json").read_text())
    assert manifest["name"] == "sft"
    assert manifest["version"] == 1
    assert manifest["parent"] is None
    assert manifest["rows"] == 25
    assert manifest["dagster_run_id"] == "run-1"
    assert manifest["config_hash"] == "cfg1"
    assert manifest["batches"] == ["b1"]
    assert sum(s["rows"] for s in manifest["shards"]) == 25 and manifest["buckets"] == {"train": 4}
    assert all(len(s["sha256"]) == 64 and s["bytes"] > 0 for s in manifest["shards"])
    assert {f["name"] for f in manifest["schema"]} >= {"sample_id", "messages", "decisions"}
    assert manifest["code_version"]
    card = (version_dir / "README.md").read_text()
    assert card.startswith("---\nconfigs:")
    assert "# sft v1" in card
    # shards are zstd and sorted by sample_id (deterministic order)
    meta = pq.ParquetFile(version_dir / "part-00000.parquet").metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    ids = store.read("sft@v1").column("sample_id").to_pylist()
    assert ids == sorted(ids)


def test_same_rows_same_config_is_a_no_op_and_force_gives_identical_bytes(
    home: Path, rows: Callable[..., pa.Table]
) -> None:
    store = DatasetStore()
    table = rows(40)
    _publish(store, table)
    shuffled = table.take(pa.array(list(range(39, -1, -1))))
    rechunked = pa.concat_tables([shuffled.slice(0, 7), shuffled.slice(7)])
    again = _publish(store, rechunked)
    assert not again.created  # type: ignore[attr-defined]
    assert store.versions("sft") == [1]
    forced = _publish(store, rechunked, force=True)
    assert forced.manifest.version == 2  # type: ignore[attr-defined]
    sha = [s.sha256 for s in store.manifest("sft", 1).shards]
    assert sha == [s.sha256 for s in store.manifest("sft", 2).shards]
    v1 = (home / "datasets/sft/v1/part-00000.parquet").read_bytes()
    assert v1 == (home / "datasets/sft/v2/part-00000.parquet").read_bytes()
    # a different config is a new version even with the same rows
    assert _publish(store, table, config_hash="cfg2").created  # type: ignore[attr-defined]


def test_parent_and_rows_added_removed(home: Path, rows: Callable[..., pa.Table]) -> None:
    store = DatasetStore()
    _publish(store, rows(10))
    second = _publish(store, pa.concat_tables([rows(7), rows(5, start=100)]), batches=["b1", "b2"])
    manifest = second.manifest  # type: ignore[attr-defined]
    assert manifest.parent == 1
    assert (manifest.rows_added, manifest.rows_removed) == (5, 3)
    assert manifest.batches == ["b1", "b2"]


def test_refs_latest_versions_and_aliases(home: Path, rows: Callable[..., pa.Table]) -> None:
    store = DatasetStore()
    _publish(store, rows(3))
    _publish(store, rows(4))
    assert store.resolve("sft@latest").version == 2
    assert store.resolve("sft").version == 2
    assert store.resolve("sft@v1").version == 1
    previous, _ = store.tag("sft@v2", "stable")
    assert previous is None
    assert store.resolve("sft@stable").version == 2
    previous, _ = store.tag("sft@v1", "stable")  # rollback
    assert previous == 2
    assert store.resolve("sft@stable").version == 1
    history = json.loads((home / "datasets/sft/aliases.json").read_text())["history"]
    assert [h["version"] for h in history] == [2, 1]
    with pytest.raises(DatasetRefError, match=r"has no version v9; versions: v1, v2"):
        store.resolve("sft@v9")
    with pytest.raises(DatasetRefError, match=r"names no version or alias.*aliases: stable"):
        store.resolve("sft@prod")
    with pytest.raises(DatasetRefError, match="no dataset named 'dpo'"):
        store.resolve("dpo@latest")
    with pytest.raises(DatasetRefError, match="cannot be an alias"):
        store.tag("sft@v1", "latest")
    with pytest.raises(DatasetRefError, match="not a dataset reference"):
        parse_ref("../etc@v1")


def test_publish_rejects_invalid_tables_and_names(home: Path, rows: Callable[..., pa.Table]) -> None:
    store = DatasetStore()
    table = rows(3)
    with pytest.raises(SchemaError, match="appears more than once"):
        _publish(store, pa.concat_tables([table, table]))
    with pytest.raises(PublishError, match=r"dataset name '\.\./x' is not allowed"):
        store.publish("../x", table, kind="sft", config_hash="c")
    with pytest.raises(PublishError, match="more than one split"):
        store.publish("sft", {"train": table, "validation": table}, kind="sft", config_hash="c")
    assert store.versions("sft") == []


def test_splits_get_named_shards_and_card_configs(home: Path, rows: Callable[..., pa.Table]) -> None:
    store = DatasetStore()
    result = store.publish(
        "sft", {"train": rows(8), "validation": rows(2, start=50)}, kind="sft", config_hash="c"
    )
    manifest = result.manifest
    assert manifest.splits == {"train": ["train-00000.parquet"], "validation": ["validation-00000.parquet"]}
    assert store.read("sft@v1", split="validation").num_rows == 2
    card = (home / "datasets/sft/v1/README.md").read_text()
    assert "split: validation" in card


def test_catalog_indexes_samples_and_rebuilds_from_manifests(
    home: Path, rows: Callable[..., pa.Table]
) -> None:
    store = DatasetStore()
    table = rows(12)
    _publish(store, table, shard_rows=5)
    target = table.column("sample_id")[4].as_py()
    located = store.catalog.locate(target)
    assert len(located) == 1
    place = located[0]
    shard = pq.read_table(home / "datasets/sft/v1" / place["shard"])
    assert shard.column("sample_id")[place["row"]].as_py() == target
    (home / "catalog.duckdb").unlink()
    assert DatasetStore().catalog.locate(target) == []
    assert DatasetStore().reindex() == 1
    assert DatasetStore().catalog.locate(target) == located


def test_object_store_path_via_fsspec_memory(
    rows: Callable[..., pa.Table], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # local state (catalog, locks) goes to ./.ptf
    store = DatasetStore("memory://ptf-test-home")
    result = store.publish("sft", rows(6), kind="sft", config_hash="c")
    assert result.path == "memory://ptf-test-home/datasets/sft/v1"
    assert store.verify("sft@latest").rows == 6
    assert store.read("sft@v1").num_rows == 6


def _publish_in_child(home: str, start: int) -> None:
    os.environ["PTF_HOME"] = home
    from tests.conftest import make_rows

    DatasetStore().publish(
        "sft", make_rows(200, start=start), kind="sft", config_hash=f"c{start}", shard_rows=20
    )


def test_concurrent_publishers_get_distinct_versions(home: Path) -> None:
    context = multiprocessing.get_context("spawn")
    children = [context.Process(target=_publish_in_child, args=(str(home), i * 1000)) for i in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
        assert child.exitcode == 0
    store = DatasetStore()
    assert store.versions("sft") == [1, 2, 3]
    for version in (1, 2, 3):
        store.verify(f"sft@v{version}")
    assert {m.config_hash for m in (store.manifest("sft", v) for v in (1, 2, 3))} == {"c0", "c1000", "c2000"}
