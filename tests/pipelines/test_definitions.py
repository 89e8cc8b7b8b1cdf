"""The Dagster graph, materialized in-process against a real (ephemeral) instance."""

import json
from pathlib import Path

import dagster as dg
import pyarrow as pa

from ptfactory.assets.annotation import curated_samples, human_labels
from ptfactory.assets.datasets import preference_dataset, sft_dataset
from ptfactory.assets.dedup import deduplicated_samples
from ptfactory.assets.execution import execution_validated
from ptfactory.assets.generation import candidate_instructions, candidate_responses
from ptfactory.assets.judging import judged_samples
from ptfactory.assets.resources import FactoryResource, SampleIOManager
from ptfactory.assets.scoring import difficulty_scored, routed_samples
from ptfactory.assets.seeds import seed_tasks
from ptfactory.pipelines.definitions import defs
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import dropped_mask
from ptfactory.storage.seedstore import SeedStore
from ptfactory.storage.versions import DatasetStore


def test_definitions_load_with_one_factory_job() -> None:
    job = defs.resolve_job_def("factory")
    keys = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    assert {"seed_tasks", "candidate_instructions", "candidate_responses", "sft_dataset"} <= keys
    checks = {c.name for c in defs.resolve_asset_graph().asset_check_keys}
    assert {"seed_tasks_schema_valid", "seed_tasks_unique_ids", "sft_dataset_shards_verified"} <= checks


def _stage(home: Path, batch: str, rows: list[dict[str, str]], tmp_path: Path) -> None:
    path = tmp_path / f"{batch}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    SeedStore(str(home)).stage([path], batch)


GRAPH = [
    seed_tasks,
    candidate_instructions,
    candidate_responses,
    deduplicated_samples,
    execution_validated,
    difficulty_scored,
    judged_samples,
    routed_samples,
    human_labels,
    curated_samples,
    sft_dataset,
    preference_dataset,
]


def test_two_batches_publish_cumulative_versions(home: Path, tmp_path: Path, tiny_model: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b1", "b2"])
    code = {
        "kind": "code",
        "instruction": 'def inc(x):\n    """x plus one"""\n',
        "response": "    return x + 1\n",
        "entry_point": "inc",
        "tests": "def check(candidate):\n    assert candidate(1) == 2\n",
    }
    _stage(home, "b1", [{"instruction": "a?", "response": "A"}, {"instruction": "b?"}, code], tmp_path)
    _stage(
        home, "b2", [{"instruction": "c?", "response": "C"}, {"instruction": "a?", "response": "A"}], tmp_path
    )
    config = tmp_path / "factory.yaml"
    # no new instructions, one-token answers: this test is about batches and versions
    config.write_text(
        f"engines:\n  generator: {{model: {tiny_model}}}\n"
        "generation: {self_instruct: {count: 0}, evol_instruct: {count: 0}, code: {count: 0},"
        " responses: {max_tokens: 1, temperature: 0}}\n"
        "difficulty: {k: 2, max_tokens: 16, ifd_max: 1000}\n"
        "routing: {accept_at: 1, max_spread: 9, reject_at: 1, audit_rate: 0}\n"
    )
    resources = {
        "factory": FactoryResource(home=str(home), config_path=str(config)),
        "samples_io": SampleIOManager(home=str(home)),
    }

    first = dg.materialize(GRAPH, instance=instance, partition_key="b1", resources=resources)
    assert first.success
    meta = first.asset_materializations_for_node("sft_dataset")[0].metadata
    assert meta["version"].value == "sft@v1"
    validated = AssetStore(str(home)).read("execution_validated", "b1")
    scored = AssetStore(str(home)).read("difficulty_scored", "b1")
    kept = scored.filter(pa.compute.invert(dropped_mask(scored)))
    assert meta["dagster/row_count"].value == kept.num_rows  # the rows difficulty kept: references
    code_rows = [r for r in validated.to_pylist() if r["kind"] == "code"]
    reference = next(r for r in code_rows if r["provenance"]["method"] == "reference")
    assert reference["scores"]["execution"]["status"] == "passed"
    assert reference["decisions"][-1]["reason"] == "tests_passed"
    sampled = {r["sample_id"] for r in code_rows if r["provenance"]["method"] == "response"}
    # a one-token answer is dropped: as empty, or by difficulty (truncated, or failing its tests)
    trails = {r["sample_id"]: r["decisions"] for r in scored.to_pylist()}
    assert sampled and all(any(d["verdict"] == "drop" for d in trails[s]) for s in sampled)
    checks = {e.check_name: e.passed for e in first.get_asset_check_evaluations()}
    assert {
        "seed_tasks_schema_valid",
        "candidate_responses_unique_ids",
        "sft_dataset_shards_verified",
    } <= set(checks)
    assert all(checks.values())

    second = dg.materialize(GRAPH, instance=instance, partition_key="b2", resources=resources)
    assert second.success
    manifest = DatasetStore(str(home)).resolve("sft@latest")
    assert (manifest.version, manifest.batches, manifest.rows_removed) == (2, ["b1", "b2"], 0)
    # the reference answer of "a?" comes again in b2: dedup finds it among the published samples
    b2 = AssetStore(str(home)).read("deduplicated_samples", "b2").to_pylist()
    again = next(r for r in b2 if r["messages"][-1]["content"] == "A")
    assert again["decisions"][-1]["reason"] == "near_duplicate_published"
    assert again["scores"]["dedup"]["jaccard"] == 1.0
    published = DatasetStore(str(home)).read("sft@v2").to_pylist()
    references = [r for r in published if r["provenance"]["method"] == "reference" and r["kind"] == "sft"]
    assert sorted(r["messages"][1]["content"] for r in references) == ["A", "C"]
    assert next(r for r in references if r["messages"][1]["content"] == "A")["batch"] == "b1"


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
