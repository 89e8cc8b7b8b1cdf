from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from ptfactory.errors import ShardIntegrityError
from ptfactory.storage.pull import pull
from ptfactory.storage.versions import DatasetStore


@pytest.fixture
def published(home: Path, rows: Callable[..., pa.Table]) -> DatasetStore:
    store = DatasetStore()
    store.publish("sft", rows(30), kind="sft", config_hash="c", shard_rows=10)
    return store


def test_pull_copies_and_verifies(published: DatasetStore, tmp_path: Path) -> None:
    manifest = pull(published, "sft@latest", tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [
        "README.md",
        "manifest.json",
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    assert manifest.rows == 30
    src = Path(published.version_dir("sft", 1))
    for shard in manifest.shards:
        assert (tmp_path / "out" / shard.file).read_bytes() == (src / shard.file).read_bytes()
    pull(published, "sft@v1", tmp_path / "out")  # a second pull over the first is fine


def test_corrupt_shard_fails_naming_the_file(published: DatasetStore, tmp_path: Path) -> None:
    shard = Path(published.version_dir("sft", 1)) / "part-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(ShardIntegrityError, match=r"part-00001\.parquet is corrupt: sha256"):
        pull(published, "sft@v1", tmp_path / "out")
    assert not (tmp_path / "out" / "part-00001.parquet").exists()
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
