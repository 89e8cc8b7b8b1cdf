"""``routed_samples`` through Dagster: each batch's routing appends to the review queue, a later
batch's budget promotes an earlier batch's waiting row (in the queue, no partition copied into
another), and ``curated_samples`` sees each row once, in its newest state, reading only what changed
since its last run (the files it opens are counted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from ptfactory.annotators.labelstudio.ledger import Event, Ledger
from ptfactory.annotators.review_queue import ReviewQueue
from ptfactory.assets.annotation import curated_samples, human_labels, review_queue
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.scoring import routed_samples
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.fs import Store
from tests.annotators.test_review_flow import _judged

# judged_samples as stored upstream output: these tests are about routing and curation, not judging
JUDGED = dg.AssetSpec("judged_samples", partitions_def=batch_partitions).with_io_manager_key("samples_io")
GRAPH = [JUDGED, routed_samples, review_queue, human_labels, curated_samples]


class Graph:
    def __init__(self, home: Path, config: Path) -> None:
        self.home, self.store = home, AssetStore(str(home))
        self.instance = dg.DagsterInstance.ephemeral()
        self.resources = factory_resources(str(config), str(home))
        self.queue = ReviewQueue(home / "review" / "queue.sqlite")
        self.ledger = Ledger(home / "annotation" / "ledger.sqlite")

    def route(self, batch: str, spreads: list[float | None]) -> dict[str, int]:
        self.store.write("judged_samples", _judged(batch, spreads), batch)
        self.instance.add_dynamic_partitions("batch", [batch])
        result = dg.materialize(
            GRAPH,
            selection=[routed_samples],
            instance=self.instance,
            partition_key=batch,
            resources=self.resources,
        )
        assert result.success
        assert all(check.passed for check in result.get_asset_check_evaluations())  # unique ids too
        meta = result.asset_materializations_for_node("routed_samples")[0].metadata
        return {k: int(meta[k].value) for k in ("needs_review", "waiting", "from_earlier_batches")}  # type: ignore[call-overload]

    def curate(self) -> dict[str, Any]:
        result = dg.materialize(
            GRAPH, selection=[curated_samples], instance=self.instance, resources=self.resources
        )
        assert result.success
        return {
            k: v.value
            for k, v in result.asset_materializations_for_node("curated_samples")[0].metadata.items()
        }

    def accept(self, sample_id: str) -> None:
        seq = self.ledger.last_seq() + 1
        result = [{"from_name": "verdict", "type": "choices", "value": {"choices": ["accept"]}}]
        event = Event(
            "created", seq, seq, 1, "sft", sample_id, "expert@x", result, False, None, f"t{seq}", 2.0
        )
        self.ledger.commit_page(1, [event], None)


@pytest.fixture
def graph(home: Path, tmp_path: Path) -> Graph:
    config = tmp_path / "factory.yaml"
    config.write_text("routing: {review_budget: 1, audit_rate: 0, max_wait_batches: 3}\n")
    return Graph(home, config)


def test_later_batch_promotes_waiting_rows_in_the_queue_and_curation_sees_each_once(graph: Graph) -> None:
    assert graph.route("b1", [6.0, 5.0, 4.0]) == {"needs_review": 1, "waiting": 2, "from_earlier_batches": 0}
    # b2: its own calm row loses to b1's waiting spread-5 row; b1's spread-4 row keeps waiting
    assert graph.route("b2", [1.0]) == {"needs_review": 1, "waiting": 1, "from_earlier_batches": 1}
    assert graph.route("b2", [1.0]) == {
        "needs_review": 1,
        "waiting": 1,
        "from_earlier_batches": 1,
    }  # rerun: same
    b2 = graph.store.read("routed_samples", "b2").to_pylist()
    assert [r["batch"] for r in b2] == ["b2"]  # b2's partition holds b2's rows only
    slots = {p.sample_id: p.slot for p in graph.queue.pending()}
    (promoted,) = graph.queue.records([s for s, slot in slots.items() if slot == "b2"]).to_pylist()
    assert promoted["messages"][0]["content"] == "b1 question 1"
    assert "review slot of batch b2, waiting since b1" in promoted["decisions"][-1]["detail"]

    graph.curate()
    table = graph.store.read("curated_samples")
    assert table.num_rows == 4  # 3 + 1 rows, the promoted one once
    state = {r["messages"][0]["content"]: r["decisions"][-1]["verdict"] for r in table.to_pylist()}
    assert state == {
        "b1 question 0": "route",
        "b1 question 1": "route",
        "b1 question 2": "wait",
        "b2 question 0": "wait",
    }


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file the store reads (Parquet tables and raw bytes), by path under PTF_HOME."""
    paths: list[str] = []
    read_table, read_bytes = Store.read_table, Store.read_bytes

    def counted_table(self: Store, path: str, columns: list[str] | None = None) -> pa.Table:
        paths.append(path)
        return read_table(self, path, columns)

    def counted_bytes(self: Store, path: str) -> bytes:
        paths.append(path)
        return read_bytes(self, path)

    monkeypatch.setattr(Store, "read_table", counted_table)
    monkeypatch.setattr(Store, "read_bytes", counted_bytes)
    return paths


def _assets_read(paths: list[str], home: Path) -> list[str]:
    """The asset files among ``paths``, as asset/partition."""
    root = str(home / "assets") + "/"
    return sorted({p[len(root) :].removesuffix(".parquet") for p in paths if p.startswith(root)})


def test_a_curation_tick_reads_only_what_changed(graph: Graph, opened: list[str]) -> None:
    for batch in ("b1", "b2", "b3"):
        graph.route(batch, [6.0, 5.0])
    opened.clear()
    first = graph.curate()  # no previous output: a full curation reads every routed partition once
    assert first["full_curation"] is True
    assert _assets_read(opened, graph.home) == [f"routed_samples/{b}" for b in ("b1", "b2", "b3")]

    opened.clear()
    slotted = graph.queue.pending()[0].sample_id
    graph.accept(slotted)  # one label: the tick reads its own last output, no routed partition
    tick = graph.curate()
    assert _assets_read(opened, graph.home) == ["curated_samples/__all__"]
    assert (tick["full_curation"], tick["routed_batches_read"], tick["rows_curated_again"]) == (False, 0, 1)
    row = next(r for r in graph.store.read("curated_samples").to_pylist() if r["sample_id"] == slotted)
    assert row["decisions"][-1]["reason"] == "human_accept"

    opened.clear()
    graph.route("b4", [7.0])  # a new batch: its routed partition, and nothing older
    opened.clear()
    graph.curate()
    assert _assets_read(opened, graph.home) == ["curated_samples/__all__", "routed_samples/b4"]

    opened.clear()
    quiet = graph.curate()  # nothing changed: its own output only
    assert _assets_read(opened, graph.home) == ["curated_samples/__all__"]
    assert quiet["rows_curated_again"] == 0

    # the pieces add up to what a full curation of the same state makes
    pieced = graph.store.read("curated_samples")
    graph.store.store.remove(graph.store.path("curated_samples"))
    assert graph.curate()["full_curation"] is True
    full = graph.store.read("curated_samples")
    key = ["batch", "sample_id"]
    assert pieced.select(full.column_names).sort_by([(k, "ascending") for k in key]).to_pylist() == (
        full.sort_by([(k, "ascending") for k in key]).to_pylist()
    )
