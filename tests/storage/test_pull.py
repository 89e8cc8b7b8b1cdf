import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptfactory.errors import ShardIntegrityError, UserInputError
from ptfactory.storage.pull import pull
from ptfactory.storage.versions import DatasetStore


@pytest.fixture
def published(home: Path, rows: Callable[..., pa.Table]) -> DatasetStore:
    store = DatasetStore()
    store.publish("sft", rows(30), kind="sft", config_hash="c", shard_rows=10)
    return store


def _held(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_pull_copies_verifies_and_writes_a_receipt(published: DatasetStore, tmp_path: Path) -> None:
    receipt = pull(published, "sft@latest", tmp_path / "out")
    # 30 rows at 10 a shard: 4 buckets of a hash of sample_id, one shard each
    assert _held(tmp_path / "out") == [
        "README.md",
        "manifest.json",
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
        "part-00003.parquet",
        "ptf_pull.json",
    ]
    assert receipt.manifest.rows == 30
    src = Path(published.version_dir("sft", 1))
    for shard in receipt.manifest.shards:
        assert (tmp_path / "out" / shard.file).read_bytes() == (src / shard.file).read_bytes()
    body = json.loads((tmp_path / "out" / "ptf_pull.json").read_text())
    assert body["version"] == 1 and body["columns"] is None
    assert body["manifest_sha256"] == hashlib.sha256((src / "manifest.json").read_bytes()).hexdigest()
    assert [s["sha256"] for s in body["shards"]] == [s.sha256 for s in receipt.manifest.shards]


def test_pull_of_v2_over_v1_is_refused_then_exact_with_force(
    published: DatasetStore, rows: Callable[..., pa.Table], tmp_path: Path
) -> None:
    published.publish("sft", rows(8, start=100), kind="sft", config_hash="c", shard_rows=10)
    out = tmp_path / "out"
    pull(published, "sft@v1", out)
    (out / "notes.txt").write_text("left by the user")  # inside an earlier pull: goes with --force
    with pytest.raises(UserInputError, match=r"is not empty .* pass --force"):
        pull(published, "sft@v2", out)
    assert len(list(out.glob("*.parquet"))) == 4  # nothing touched
    receipt = pull(published, "sft@v2", out, force=True)
    # v2's 8 rows keep 2 of v1's 4 buckets (the count halves only below a quarter-full average)
    v2_files = ["part-00000.parquet", "part-00001.parquet"]
    assert _held(out) == ["README.md", "manifest.json", *v2_files, "ptf_pull.json"]
    # a glob reader now reads exactly v2's rows, none of v1's
    read = pa.concat_tables([pq.read_table(out / f) for f in v2_files])
    assert sorted(read.column("sample_id").to_pylist()) == sorted(
        rows(8, start=100).column("sample_id").to_pylist()
    )
    assert json.loads((out / "manifest.json").read_text())["version"] == 2 == receipt.manifest.version


def test_force_never_empties_a_folder_that_is_not_a_pull(published: DatasetStore, tmp_path: Path) -> None:
    data = tmp_path / "my-data"
    data.mkdir()
    (data / "precious.parquet").write_bytes(b"mine")
    with pytest.raises(UserInputError, match="not a pulled version"):
        pull(published, "sft@v1", data, force=True)
    assert _held(data) == ["precious.parquet"]


def test_pull_projects_columns_with_their_own_checksums(published: DatasetStore, tmp_path: Path) -> None:
    out = tmp_path / "messages-only"
    receipt = pull(published, "sft@v1", out, columns=["sample_id", "messages"])
    body = json.loads((out / "ptf_pull.json").read_text())
    assert body["columns"] == ["sample_id", "messages"]
    total = 0
    for shard in body["shards"]:
        data = (out / shard["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == shard["sha256"] and len(data) == shard["bytes"]
        table = pq.read_table(out / shard["file"])
        assert table.column_names == ["sample_id", "messages"] and table.num_rows == shard["rows"]
        total += table.num_rows
    assert total == receipt.manifest.rows == 30
    with pytest.raises(UserInputError, match=r"'mesages' is not a column of sft@v1; columns: sample_id"):
        pull(published, "sft@v1", tmp_path / "bad", columns=["mesages"])
    assert not (tmp_path / "bad").exists()


def test_corrupt_shard_fails_naming_the_file(published: DatasetStore, tmp_path: Path) -> None:
    shard = Path(published.version_dir("sft", 1)) / "part-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(ShardIntegrityError, match=r"part-00001\.parquet is corrupt: sha256"):
        pull(published, "sft@v1", tmp_path / "out")
    # nothing of the failed pull stays, in the target or staged beside it: a retry is allowed
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if "ptf-pull-" in p.name] == []
    with pytest.raises(ShardIntegrityError, match="part-00001"):
        published.verify("sft@v1")


def test_missing_shard_fails_naming_the_file(published: DatasetStore, tmp_path: Path) -> None:
    (Path(published.version_dir("sft", 1)) / "part-00002.parquet").unlink()
    with pytest.raises(ShardIntegrityError, match=r"part-00002\.parquet is missing"):
        pull(published, "sft@latest", tmp_path / "out")


def test_truncated_shard_fails(published: DatasetStore, tmp_path: Path) -> None:
    shard = Path(published.version_dir("sft", 1)) / "part-00000.parquet"
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(ShardIntegrityError, match=r"part-00000\.parquet is corrupt"):
        pull(published, "sft@latest", tmp_path / "out")
