"""A published version reads directly with the tools trainers already use."""

from collections.abc import Callable
from pathlib import Path

import datasets
import polars as pl
import pyarrow as pa
import pytest

from ptfactory.storage.versions import DatasetStore


@pytest.fixture
def version_dir(home: Path, rows: Callable[..., pa.Table]) -> Path:
    store = DatasetStore()
    store.publish("sft", rows(25), kind="sft", config_hash="c", shard_rows=10)
    return Path(store.version_dir("sft", 1))


def test_hf_datasets_parquet_data_files(version_dir: Path, tmp_path: Path) -> None:
    ds = datasets.load_dataset(
        "parquet", data_files=str(version_dir / "*.parquet"), split="train", cache_dir=str(tmp_path / "hf")
    )
    assert ds.num_rows == 25
    first = ds[0]
    assert first["messages"][0]["role"] == "user"
    assert first["decisions"][0]["stage"] == "seed"


def test_hf_datasets_reads_the_card_configs(version_dir: Path, tmp_path: Path) -> None:
    ds = datasets.load_dataset(str(version_dir), cache_dir=str(tmp_path / "hf"))
    assert list(ds.keys()) == ["train"]
    assert ds["train"].num_rows == 25


def test_hf_datasets_reads_split_versions(home: Path, rows: Callable[..., pa.Table], tmp_path: Path) -> None:
    store = DatasetStore()
    store.publish("sft", {"train": rows(9), "validation": rows(3, start=100)}, kind="sft", config_hash="c")
    ds = datasets.load_dataset(store.version_dir("sft", 1), cache_dir=str(tmp_path / "hf"))
    assert {k: v.num_rows for k, v in ds.items()} == {"train": 9, "validation": 3}


def test_polars_scan_parquet(version_dir: Path) -> None:
    frame = pl.scan_parquet(version_dir / "*.parquet").select("sample_id", "kind").collect()
    assert frame.height == 25
    assert frame["kind"].unique().to_list() == ["sft"]
