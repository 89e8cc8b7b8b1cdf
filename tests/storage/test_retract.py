import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ptfactory.errors import DatasetRefError, UserInputError
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.diff import diff
from ptfactory.storage.lineage import lineage
from ptfactory.storage.retract import read_sample_ids, retract, retracted
from ptfactory.storage.versions import DatasetStore


def _ids(table: pa.Table) -> set[str]:
    return set(table.column("sample_id").to_pylist())


@pytest.fixture
def v1(home: Path, rows: Callable[..., pa.Table]) -> DatasetStore:
    """sft@v1: batches b1 (10 rows) and b2 (6 rows) over a train and a validation split."""
    store = DatasetStore()
    train = pa.concat_tables([rows(8, "b1"), rows(4, "b2", start=100)])
    validation = pa.concat_tables([rows(2, "b1", start=50), rows(2, "b2", start=150)])
    store.publish(
        "sft",
        {"train": train, "validation": validation},
        kind="sft",
        config_hash="cfg",
        batches=["b1", "b2"],
        stats={"estimated_cost_usd": 1.5},
    )
    return store


def test_retract_a_batch_publishes_the_next_version_without_it_in_the_same_splits(v1: DatasetStore) -> None:
    before = {s: v1.read("sft@v1", split=s) for s in ("train", "validation")}
    result = retract(v1, "sft@v1", ["b2"], [], reason="judge outage", by="alice")
    made = result.manifest
    assert result.created and made.version == 2 and made.parent == 1
    assert made.rows == 10 and made.rows_removed == 6 and made.batches == ["b1"]
    assert made.kind == "sft" and made.config_hash == "cfg"
    for split, table in before.items():
        kept = v1.read("sft@v2", split=split)
        assert set(kept.column("batch").to_pylist()) == {"b1"}
        assert _ids(kept) == _ids(table.filter(pc.equal(table.column("batch"), "b1")))
    record = made.retraction
    assert record is not None
    assert {k: record[k] for k in ("from", "batches", "sample_ids", "rows", "reason", "by")} == {
        "from": 1,
        "batches": ["b2"],
        "sample_ids": [],
        "rows": 6,
        "reason": "judge outage",
        "by": "alice",
    }
    assert record["at"].endswith("+00:00")
    # read back from disk, not just returned; the stats carry over, the row counts are v2's own
    on_disk = json.loads((Path(result.path) / "manifest.json").read_text())
    assert on_disk["retraction"]["batches"] == ["b2"]
    assert on_disk["stats"]["estimated_cost_usd"] == 1.5
    assert on_disk["stats"]["rows_per_split"] == {"train": 8, "validation": 2}
    assert v1.read("sft@v1").num_rows == 16  # the pinned version keeps every row


@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".parquet"])
def test_retract_sample_ids_from_a_file(v1: DatasetStore, tmp_path: Path, suffix: str) -> None:
    train = v1.read("sft@v1", split="train")
    chosen = sorted(_ids(train))[:3]
    path = tmp_path / f"ids{suffix}"
    if suffix == ".txt":
        path.write_text("# bad answers\n" + "\n".join(chosen) + "\n\n")
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps({"sample_id": i, "note": "x"}) + "\n" for i in chosen))
    else:
        pq.write_table(pa.table({"sample_id": chosen}), path)
    ids = read_sample_ids(path)
    assert ids == chosen
    made = retract(v1, "sft@latest", [], ids, reason="wrong answers", by="bob").manifest
    assert made.rows == 13 and not (_ids(v1.read("sft@v2")) & set(chosen))
    assert made.batches == ["b1", "b2"]  # both still have rows
    assert made.retraction is not None and made.retraction["sample_ids"] == chosen
    assert made.retraction["rows"] == 3 and made.retraction["batches"] == []


def test_a_retraction_that_matches_no_row_publishes_nothing(v1: DatasetStore, tmp_path: Path) -> None:
    with pytest.raises(
        UserInputError, match=r"sft@v1 has no row to retract: no row matches batch b9; its batches: b1, b2"
    ):
        retract(v1, "sft@v1", ["b9"], [], reason="typo", by="carol")
    with pytest.raises(UserInputError, match=r"no row matches sample id 0123abcd"):
        retract(v1, "sft@v1", [], ["0123abcd"], reason="typo", by="carol")
    with pytest.raises(UserInputError, match=r"--reason"):
        retract(v1, "sft@v1", ["b1"], [], reason="  ", by="carol")
    with pytest.raises(DatasetRefError, match=r"has no version v7"):
        retract(v1, "sft@v7", ["b1"], [], reason="r", by="carol")
    (tmp_path / "empty.txt").write_text("\n# nothing\n")
    with pytest.raises(UserInputError, match=r"holds no sample ids"):
        read_sample_ids(tmp_path / "empty.txt")
    assert v1.versions("sft") == [1]


def test_only_the_latest_version_can_be_retracted_from(
    v1: DatasetStore, rows: Callable[..., pa.Table]
) -> None:
    v1.publish("sft", rows(3, "b3", start=300), kind="sft", config_hash="cfg2", batches=["b3"])
    with pytest.raises(
        UserInputError, match=r"sft@v1 is not the latest version .*\(v2\); retract from sft@v2"
    ):
        retract(v1, "sft@v1", ["b1"], [], reason="r", by="dan")
    assert v1.versions("sft") == [1, 2]


def test_retracted_gathers_every_retraction_and_masks_rows(
    v1: DatasetStore, rows: Callable[..., pa.Table]
) -> None:
    assert not retracted(v1, "sft") and not retracted(v1, "no-such-dataset")
    one_id = sorted(_ids(v1.read("sft@v1").filter(pc.equal(v1.read("sft@v1").column("batch"), "b1"))))[0]
    retract(v1, "sft@v1", ["b2"], [], reason="outage", by="alice")
    retract(v1, "sft@v2", [], [one_id], reason="leak", by="bob")
    gone = retracted(v1, "sft")
    assert gone.batches == frozenset({"b2"}) and gone.sample_ids == frozenset({one_id})
    # a later curation run over stage outputs: b2's rows (new or old) and that one id stay out
    curated = pa.concat_tables([v1.read("sft@v1"), rows(2, "b2", start=900), rows(2, "b4", start=950)])
    mask = gone.mask(curated)
    assert isinstance(mask, pa.Array) and len(mask) == curated.num_rows
    flagged = curated.filter(mask)
    assert set(flagged.column("batch").to_pylist()) == {"b1", "b2"}
    assert flagged.num_rows == 6 + 2 + 1
    assert _ids(flagged.filter(pc.equal(flagged.column("batch"), "b1"))) == {one_id}
    only_batch = gone.mask(curated.select(["batch"]))  # a table without sample ids: by batch only
    assert sum(only_batch.to_pylist()) == 8


def test_lineage_shows_which_version_dropped_a_sample_by_whom_and_why(
    v1: DatasetStore, rows: Callable[..., pa.Table]
) -> None:
    sid = sorted(_ids(v1.read("sft@v1", split="validation")))[0]
    retract(v1, "sft@v1", [], [sid], reason="contains a phone number", by="erin")
    story = lineage(sid[:12], v1, AssetStore())
    assert [(p["dataset"], p["version"]) for p in story["versions"]] == [("sft", 1)]
    [item] = story["retractions"]
    assert item["dataset"] == "sft" and item["version"] == 2 and item["from"] == 1
    assert item["effect"] == "dropped" and item["matched"] == "sample id"
    assert item["by"] == "erin" and item["reason"] == "contains a phone number" and item["at"]
    # a row of a retracted batch curated later is kept out; lineage says so for its stage output
    retract(v1, "sft@v2", ["b2"], [], reason="outage", by="frank")
    late = rows(1, "b2", start=700)
    AssetStore().write("curated_samples", late, partition="b2")
    story = lineage(late.column("sample_id")[0].as_py(), v1, AssetStore())
    assert story["versions"] == []
    assert [(r["version"], r["effect"], r["matched"]) for r in story["retractions"]] == [
        (3, "kept out", "batch b2")
    ]
    untouched = sorted(_ids(v1.read("sft@v3")))[0]
    assert lineage(untouched, v1, AssetStore())["retractions"] == []


def test_diff_lists_added_and_removed_rows(home: Path, rows: Callable[..., pa.Table]) -> None:
    store = DatasetStore()
    store.publish("sft", rows(10, "b1"), kind="sft", config_hash="c")
    store.publish(
        "sft",
        pa.concat_tables([rows(5, "b1", start=5), rows(4, "b2", start=20)]),
        kind="sft",
        config_hash="c",
    )
    found = diff(store, "sft@v1", "sft@latest")
    assert (found.old, found.new, found.old_rows, found.new_rows) == ("sft@v1", "sft@v2", 10, 9)
    assert (found.added, found.removed, found.unchanged) == (4, 5, 5)
    assert found.added_by_batch == {"b2": 4} and found.removed_by_batch == {"b1": 5}
    assert found.added_ids == sorted(rows(4, "b2", start=20).column("sample_id").to_pylist())
    assert found.removed_ids == sorted(rows(5, "b1").column("sample_id").to_pylist())
    assert found.retraction is None
    capped = diff(store, "sft@v1", "sft@v2", limit=2)
    assert (
        capped.removed == 5 and len(capped.removed_ids) == 2 and capped.removed_ids == found.removed_ids[:2]
    )
    back = diff(store, "sft@v2", "sft@v1").to_dict()
    assert back["added"] == 5 and back["removed"] == 4
    assert diff(store, "sft@v1", "sft@v1").to_dict()["added_ids"] == []
