"""The Dagster graph, materialized in-process against a real (ephemeral) instance."""

import json
from pathlib import Path

import dagster as dg
import pyarrow as pa

from assets.datasets import sft_dataset
from assets.seeds import seed_tasks
from pipelines.definitions import defs
from pipelines.resources import FactoryResource, SampleIOManager
from storage.assetstore import AssetStore
from storage.seedstore import SeedStore
from storage.versions import DatasetStore


def test_definitions_load_with_one_factory_job() -> None:
    job = defs.resolve_job_def("factory")
    keys = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    assert {"seed_tasks", "sft_dataset"} <= keys
    checks = {c.name for c in defs.resolve_asset_graph().asset_check_keys}
    assert {"seed_tasks_schema_valid", "seed_tasks_unique_ids", "sft_dataset_shards_verified"} <= checks


def _stage(home: Path, batch: str, rows: list[dict[str, str]], tmp_path: Path) -> None:
    path = tmp_path / f"{batch}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    SeedStore(str(home)).stage([path], batch)


def test_two_batches_publish_cumulative_versions(home: Path, tmp_path: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b1", "b2"])
    _stage(home, "b1", [{"instruction": "a?", "response": "A"}, {"instruction": "b?"}], tmp_path)
    _stage(
        home, "b2", [{"instruction": "c?", "response": "C"}, {"instruction": "a?", "response": "A"}], tmp_path
    )
    resources = {"factory": FactoryResource(home=str(home)), "samples_io": SampleIOManager(home=str(home))}

    first = dg.materialize(
        [seed_tasks, sft_dataset], instance=instance, partition_key="b1", resources=resources
    )
    assert first.success
    meta = first.asset_materializations_for_node("sft_dataset")[0].metadata
    assert meta["version"].value == "sft@v1"
    assert meta["dagster/row_count"].value == 1
    checks = {e.check_name: e.passed for e in first.get_asset_check_evaluations()}
    assert checks == {
        "seed_tasks_schema_valid": True,
        "seed_tasks_unique_ids": True,
        "sft_dataset_schema_valid": True,
        "sft_dataset_unique_ids": True,
        "sft_dataset_shards_verified": True,
    }

    second = dg.materialize(
        [seed_tasks, sft_dataset], instance=instance, partition_key="b2", resources=resources
    )
    assert second.success
    manifest = DatasetStore(str(home)).resolve("sft@latest")
    # "a?" appears in both batches: published once, from the first batch
    assert (manifest.version, manifest.rows, manifest.batches) == (2, 2, ["b1", "b2"])
    assert (manifest.rows_added, manifest.rows_removed) == (1, 0)
    left_out = second.asset_materializations_for_node("sft_dataset")[0].metadata["left_out"].value
    assert "duplicate_across_batches | 1" in left_out and "no_response | 1" in left_out
    stored = pa.concat_tables([AssetStore(str(home)).read("seed_tasks", b) for b in ("b1", "b2")])
    assert stored.num_rows == 4  # every row is kept in the stage output, published or not


def test_missing_staged_seeds_fail_with_a_hint(home: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["ghost"])
    result = dg.materialize(
        [seed_tasks],
        instance=instance,
        partition_key="ghost",
        raise_on_error=False,
        resources={"factory": FactoryResource(home=str(home)), "samples_io": SampleIOManager(home=str(home))},
    )
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data.error
    assert failure is not None
    assert "ptf run --seeds" in str(failure.cause.message if failure.cause else failure.message)
