"""``storage.rebase``: a table computed over an older version, moved onto the latest, keeps its own
change and what the newer versions changed (pure logic over a local store)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ptfactory.storage import rebase as rebase_module
from ptfactory.storage.rebase import change_over, rebase
from ptfactory.storage.versions import DatasetStore
from tests.conftest import make_rows


def _ids(table: pa.Table) -> set[str]:
    return set(table.column("sample_id").to_pylist())


@pytest.mark.parametrize("row_sums", [True, False])
def test_a_change_over_v1_lands_on_v2_with_v2s_change(
    home: Path, monkeypatch: pytest.MonkeyPatch, row_sums: bool
) -> None:
    if not row_sums:  # a version published before row sums: the change is found row by row
        monkeypatch.setattr(rebase_module, "changes_since", lambda *_: None)
    store = DatasetStore(str(home))
    x, y = make_rows(4, batch="x"), make_rows(3, batch="y", start=100)
    store.publish("sft", pa.concat_tables([x, y]), kind="sft", config_hash="c", shard_rows=2)
    # this run, over v1: drops y's first row, adds batch a
    a = make_rows(2, batch="a", start=200)
    mine = pa.concat_tables([x, y.slice(1), a])
    upserts, removed = change_over(store, "sft", mine, 1)
    assert _ids(upserts) == _ids(a) and removed == y.slice(0, 1).column("sample_id").to_pylist()
    # meanwhile v2: x's last row taken out, batch b added
    b = make_rows(2, batch="b", start=300)
    store.publish("sft", pa.concat_tables([x.slice(0, 3), y, b]), kind="sft", config_hash="c", shard_rows=2)
    moved = rebase(store, "sft", mine, base=1, onto=2)
    assert _ids(moved) == _ids(x.slice(0, 3)) | _ids(y.slice(1)) | _ids(a) | _ids(b)
    assert moved.num_rows == len(_ids(moved))  # each id once
    # over no version: the table is the change
    assert _ids(rebase(store, "sft", a, base=0, onto=2)) == _ids(x.slice(0, 3)) | _ids(y) | _ids(a) | _ids(b)
