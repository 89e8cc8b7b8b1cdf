"""``routed_samples`` through Dagster: a later batch's materialization promotes the earlier batch's
waiting rows within its budget, and ``curated_samples`` (every partition) sees each row once."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from ptfactory.assets.annotation import curated_samples, human_labels
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import FactoryResource, SampleIOManager
from ptfactory.assets.scoring import routed_samples
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import latest_copies
from tests.annotators.test_review_flow import _judged


def test_later_batch_promotes_waiting_rows_and_curation_sees_each_once(home: Path, tmp_path: Path) -> None:
    store = AssetStore(str(home))
    store.write("judged_samples", _judged("b1", [6.0, 5.0, 4.0]), "b1")
    store.write("judged_samples", _judged("b2", [1.0]), "b2")
    config = tmp_path / "factory.yaml"
    config.write_text("routing: {review_budget: 1, audit_rate: 0, max_wait_batches: 3}\n")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b1", "b2"])
    resources = {
        "factory": FactoryResource(home=str(home), config_path=str(config)),
        "samples_io": SampleIOManager(home=str(home)),
    }
    # judged_samples as stored upstream output: this test is about routing, not judging
    judged = dg.AssetSpec("judged_samples", partitions_def=batch_partitions).with_io_manager_key("samples_io")
    graph = [judged, routed_samples, human_labels, curated_samples]

    def route_batch(batch: str) -> dict[str, int]:
        result = dg.materialize(
            graph, selection=[routed_samples], instance=instance, partition_key=batch, resources=resources
        )
        assert result.success
        assert all(check.passed for check in result.get_asset_check_evaluations())  # unique ids too
        meta = result.asset_materializations_for_node("routed_samples")[0].metadata
        return {k: int(meta[k].value) for k in ("needs_review", "waiting", "from_earlier_batches")}  # type: ignore[call-overload]

    assert route_batch("b1") == {"needs_review": 1, "waiting": 2, "from_earlier_batches": 0}
    # b2: its own calm row loses to b1's waiting spread-5 row; b1's spread-4 row keeps waiting
    assert route_batch("b2") == {"needs_review": 1, "waiting": 1, "from_earlier_batches": 1}
    assert route_batch("b2") == {"needs_review": 1, "waiting": 1, "from_earlier_batches": 1}  # rerun: same
    b2 = store.read("routed_samples", "b2").to_pylist()
    promoted = next(r for r in b2 if r["batch"] == "b1")
    assert promoted["messages"][0]["content"] == "b1 question 1"
    assert "review slot of batch b2, waiting since b1" in promoted["decisions"][-1]["detail"]

    curated = dg.materialize(graph, selection=[curated_samples], instance=instance, resources=resources)
    assert curated.success
    table = store.read("curated_samples")
    assert table.num_rows == 4  # 3 + 1 rows, the promoted one once
    assert latest_copies(table).num_rows == table.num_rows
    state = {r["messages"][0]["content"]: r["decisions"][-1]["verdict"] for r in table.to_pylist()}
    assert state == {
        "b1 question 0": "route",
        "b1 question 1": "route",
        "b1 question 2": "wait",
        "b2 question 0": "wait",
    }
