"""Parquet reads never hand Arrow a Python file object: Arrow's I/O threads would call back into
Python, and one still waiting for the GIL at interpreter exit aborts the process after the
command's work is done (seen as `ptf annotate push` exiting with SIGABRT under load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.fs import Store, parquet_from_bytes


def _no_python_files(*_: Any, **__: Any) -> Any:
    raise AssertionError("a Parquet read opened a Python file object")


def test_asset_reads_go_through_arrow_not_python_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = AssetStore(str(tmp_path))
    table = pa.table({"sample_id": ["a", "b"], "n": [1, 2]})
    store.write("routed_samples", table, "b1")
    monkeypatch.setattr(Store, "open", _no_python_files)
    assert store.read("routed_samples", "b1").equals(table)
    assert store.read_file(store.files("routed_samples")[0]).column("n").to_pylist() == [1, 2]


def test_parquet_from_bytes_projects_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1], "b": ["x"]}), path)
    assert parquet_from_bytes(path.read_bytes(), ["b"]).to_pylist() == [{"b": "x"}]
