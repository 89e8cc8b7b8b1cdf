"""Incremental curation: a version whose rows mostly equal its parent's reuses the parent's shards."""

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ptfactory.storage.manifest import Manifest
from ptfactory.storage.versions import DatasetStore


def _relabel(table: pa.Table, index: int, batch: str = "relabelled") -> pa.Table:
    """The same rows with one row's ``batch`` changed (a new label: same sample_id, new content)."""
    values = table.column("batch").to_pylist()
    values[index] = batch
    position = table.schema.get_field_index("batch")
    return table.set_column(position, table.schema.field(position), pa.array(values, pa.string()))


def _by_file(manifest: Manifest) -> dict[str, object]:
    return {s.file: s for s in manifest.shards}


def _rewritten(manifest: Manifest) -> list[str]:
    return [s.file for s in manifest.shards if s.reused_from is None]


def _sorted_rows(table: pa.Table) -> list[tuple[str, str]]:
    return sorted(zip(table.column("sample_id").to_pylist(), table.column("batch").to_pylist(), strict=True))


def _samples_rows(store: DatasetStore, version: int) -> int:
    found = store.catalog.query("SELECT count(*) FROM samples WHERE name = 'sft' AND version = ?", [version])
    return int(found[0][0])


def _located(store: DatasetStore, sample: str) -> list[tuple[int, str, int]]:
    return [(p["version"], p["shard"], p["row"]) for p in store.catalog.locate(sample)]


def test_one_changed_row_rewrites_one_shard_and_links_the_rest(
    home: Path, rows: Callable[..., pa.Table]
) -> None:
    store = DatasetStore()
    v1_rows = rows(80)
    v1 = store.publish("sft", v1_rows, kind="sft", config_hash="c", shard_rows=10).manifest
    assert v1.buckets == {"train": 8} and len(v1.shards) == 8
    changed = _relabel(v1_rows, 17)
    v2 = store.publish("sft", changed, kind="sft", config_hash="c", shard_rows=10).manifest

    assert v2.version == 2 and v2.buckets == v1.buckets
    assert [s.file for s in v2.shards] == [s.file for s in v1.shards]  # a bucket keeps its file
    (new_file,) = _rewritten(v2)
    old, new = _by_file(v1), _by_file(v2)
    v1_dir, v2_dir = Path(store.version_dir("sft", 1)), Path(store.version_dir("sft", 2))
    for file, shard in new.items():
        same_inode = os.stat(v1_dir / file).st_ino == os.stat(v2_dir / file).st_ino
        if file == new_file:
            assert shard.sha256 != old[file].sha256 and not same_inode  # type: ignore[attr-defined]
        else:
            assert shard.reused_from == 1 and shard.sha256 == old[file].sha256  # type: ignore[attr-defined]
            assert same_inode  # a hard link: the bytes were not written again
    assert _sorted_rows(store.read("sft@v2", verify=True)) == _sorted_rows(changed)
    assert store.read("sft@v2").column("sample_id").to_pylist() == sorted(
        changed.column("sample_id").to_pylist()
    )  # buckets are ranges of the id: still sorted end to end
    assert (v2.rows_added, v2.rows_removed) == (0, 0)

    # the sample index grew by the rewritten shard's rows only; reused shards are references
    assert _samples_rows(store, 1) == 80
    assert _samples_rows(store, 2) == new[new_file].rows  # type: ignore[attr-defined]
    refs = store.catalog.query("SELECT file, from_version FROM shard_refs WHERE name = 'sft' AND version = 2")
    assert sorted(refs) == sorted((f, 1) for f in new if f != new_file)
    relabelled = changed.column("sample_id")[17].as_py()
    reused_sample = next(
        s for s in changed.column("sample_id").to_pylist() if _located(store, s)[0][1] != new_file
    )
    for sample in (relabelled, reused_sample):
        located = _located(store, sample)
        assert [v for v, _, _ in located] == [1, 2]
        assert located[0][1:] == located[1][1:]  # same shard and row in both versions

    before = {s: _located(store, s) for s in (relabelled, reused_sample)}
    assert DatasetStore().reindex() == 2
    again = DatasetStore()
    assert {s: _located(again, s) for s in before} == before
    assert _samples_rows(again, 2) == new[new_file].rows  # type: ignore[attr-defined]

    # a third version over the second: a shard reused twice still points at the version that wrote it
    v3 = store.publish("sft", _relabel(changed, 17, "again"), kind="sft", config_hash="c", shard_rows=10)
    assert {s.reused_from for s in v3.manifest.shards if s.file != new_file} == {1}
    assert [v for v, _, _ in _located(store, reused_sample)] == [1, 2, 3]


def test_only_the_touched_split_is_rewritten(home: Path, rows: Callable[..., pa.Table]) -> None:
    store = DatasetStore()
    train, validation = rows(60), rows(20, start=500)
    store.publish(
        "sft", {"train": train, "validation": validation}, kind="sft", config_hash="c", shard_rows=10
    )
    v2 = store.publish(
        "sft",
        {"train": _relabel(train, 3), "validation": validation},
        kind="sft",
        config_hash="c",
        shard_rows=10,
    ).manifest
    rewritten = _rewritten(v2)
    assert len(rewritten) == 1 and rewritten[0].startswith("train-")
    assert all(not f.startswith("validation-") for f in rewritten)
    assert _sorted_rows(store.read("sft@v2", split="validation")) == _sorted_rows(validation)


def test_a_version_without_some_rows_rewrites_only_their_shards(
    home: Path, rows: Callable[..., pa.Table]
) -> None:
    store = DatasetStore()
    v1_rows = rows(80)
    store.publish("sft", v1_rows, kind="sft", config_hash="c", shard_rows=10)
    gone = v1_rows.column("sample_id")[5].as_py()
    kept = v1_rows.filter(pc.not_equal(v1_rows.column("sample_id"), gone))
    v2 = store.publish("sft", kept, kind="sft", config_hash="c", shard_rows=10).manifest
    assert (v2.rows, v2.rows_removed) == (79, 1)
    assert len(_rewritten(v2)) == 1
    assert _sorted_rows(store.read("sft@v2")) == _sorted_rows(kept)
    assert [p["version"] for p in store.catalog.locate(gone)] == [1]


def test_republishing_the_same_rows_is_a_no_op_and_force_reuses_every_shard(
    home: Path, rows: Callable[..., pa.Table]
) -> None:
    store = DatasetStore()
    table = rows(40)
    first = store.publish("sft", table, kind="sft", config_hash="c", shard_rows=10)
    again = store.publish("sft", rows(40), kind="sft", config_hash="c", shard_rows=10)
    assert not again.created and again.manifest.version == 1
    forced = store.publish("sft", table, kind="sft", config_hash="c", shard_rows=10, force=True).manifest
    assert forced.version == 2 and not _rewritten(forced)
    assert [s.sha256 for s in forced.shards] == [s.sha256 for s in first.manifest.shards]
    assert (
        _samples_rows(store, 2) == 0 and len(store.catalog.locate(table.column("sample_id")[0].as_py())) == 2
    )


def test_reuse_off_rewrites_every_shard(home: Path, rows: Callable[..., pa.Table]) -> None:
    store = DatasetStore()
    table = rows(40)
    store.publish("sft", table, kind="sft", config_hash="c", shard_rows=10)
    v2 = store.publish("sft", _relabel(table, 0), kind="sft", config_hash="c", shard_rows=10, reuse=False)
    assert _rewritten(v2.manifest) == [s.file for s in v2.manifest.shards]
    assert _samples_rows(store, 2) == 40


@pytest.mark.parametrize("where", ["memory", "s3"])
def test_an_object_store_copies_unchanged_shards_server_side(
    where: str,
    rows: Callable[..., pa.Table],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.chdir(tmp_path)  # local state (catalog, locks) goes to ./.ptf
    home = (
        f"memory://ptf-incr-{uuid.uuid4().hex[:8]}"
        if where == "memory"
        else request.getfixturevalue("s3_home")
    )
    store = DatasetStore(home)
    table = rows(40)
    v1 = store.publish("sft", table, kind="sft", config_hash="c", shard_rows=10).manifest
    changed = _relabel(table, 9)
    v2 = store.publish("sft", changed, kind="sft", config_hash="c", shard_rows=10).manifest
    assert len(_rewritten(v2)) == 1
    old = _by_file(v1)
    for shard in v2.shards:
        if shard.reused_from is not None:
            assert shard.sha256 == old[shard.file].sha256  # type: ignore[attr-defined]
    store.verify("sft@v2")  # every listed shard is in v2/ with the recorded sha256
    assert sorted(store.store.listdir(store.version_dir("sft", 2))) == sorted(
        ["README.md", "manifest.json", *[s.file for s in v2.shards]]
    )
    assert _sorted_rows(store.read("sft@v2")) == _sorted_rows(changed)
    assert not store.store.find(store.store.path("sft", ".staging"))  # no staged object left


def test_bucket_count_keeps_the_parents_and_moves_by_powers_of_two() -> None:
    from ptfactory.storage.shards import bucket_count

    assert [bucket_count(n, 10) for n in (0, 1, 10, 11, 25, 40, 41)] == [1, 1, 1, 2, 4, 4, 8]
    assert bucket_count(79, 10, previous=4) == 4  # up to 2x shard_rows a bucket: kept
    assert bucket_count(81, 10, previous=4) == 8
    assert bucket_count(10, 10, previous=4) == 4 and bucket_count(9, 10, previous=4) == 2


def test_a_grown_version_doubles_its_buckets_and_reads_back_whole(
    home: Path, rows: Callable[..., pa.Table]
) -> None:
    store = DatasetStore()
    store.publish("sft", rows(40), kind="sft", config_hash="c", shard_rows=10)
    grown = pa.concat_tables([rows(40), rows(60, start=1000)])
    v2 = store.publish("sft", grown, kind="sft", config_hash="c", shard_rows=10).manifest
    assert v2.buckets == {"train": 8} and len(_rewritten(v2)) == len(v2.shards)
    assert (v2.rows_added, v2.rows_removed) == (60, 0)
    assert _sorted_rows(store.read("sft@v2", verify=True)) == _sorted_rows(grown)
