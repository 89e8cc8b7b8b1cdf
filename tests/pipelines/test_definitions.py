"""The Dagster graph, materialized in-process against a real (ephemeral) instance."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from ptfactory.annotators.labelstudio.ledger import Event, Ledger
from ptfactory.annotators.labelstudio.tasks import queue_of
from ptfactory.assets.annotation import curated_samples, human_labels
from ptfactory.assets.datasets import preference_dataset, sft_dataset
from ptfactory.assets.decontamination import decontaminated_samples
from ptfactory.assets.dedup import deduplicated_samples
from ptfactory.assets.execution import execution_validated
from ptfactory.assets.generation import candidate_instructions, candidate_responses
from ptfactory.assets.judging import judged_samples
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.scoring import difficulty_scored, routed_samples
from ptfactory.assets.seeds import seed_tasks
from ptfactory.pipelines.definitions import defs
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import awaiting_review, dropped_mask
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


REVIEW = [seed_tasks, candidate_instructions, candidate_responses, deduplicated_samples]
REVIEW += [decontaminated_samples, execution_validated, difficulty_scored, judged_samples, routed_samples]
CURATION = [human_labels, curated_samples, sft_dataset, preference_dataset]
GRAPH = REVIEW + CURATION  # the whole graph up to publish (tests/pipelines/test_multiprocess.py runs it)


def _label(
    home: Path, routed: pa.Table, decide: Callable[[dict[str, Any]], list[dict[str, Any]]]
) -> list[str]:
    """An expert's label for every row routed to review, appended to the label log the way
    ``ptf annotate pull`` appends it (Label Studio itself: tests/integration/test_labelstudio.py)."""
    ledger = Ledger(home / "annotation" / "ledger.sqlite")
    rows = [r for r in routed.to_pylist() if awaiting_review(r["decisions"])]
    start = ledger.last_seq() + 1
    events = [
        Event(
            "created",
            start + i,
            start + i,
            1,
            queue_of(row),
            row["sample_id"],
            "expert@x",
            decide(row),
            False,
            None,
            f"t{start + i}",
            2.0,
        )
        for i, row in enumerate(rows)
    ]
    ledger.commit_page(1, events, None)
    return [r["sample_id"] for r in rows]


def _choice(name: str, value: str) -> list[dict[str, Any]]:
    return [{"from_name": name, "type": "choices", "value": {"choices": [value]}}]


def test_two_batches_reviewed_and_published_as_cumulative_versions(
    home: Path, tmp_path: Path, tiny_model: Path
) -> None:
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
    # no new instructions, one-token answers: this test is about review, batches and versions. The
    # default panel judges; no score reaches 10 and none is at or under 1, so every scored row goes
    # to an expert (routing's own bands: tests/annotators/test_routing.py)
    config.write_text(
        f"engines:\n  generator: {{model: {tiny_model}}}\n"
        "generation: {self_instruct: {count: 0}, evol_instruct: {count: 0}, code: {count: 0},"
        " responses: {max_tokens: 1, temperature: 0}}\n"
        "difficulty: {k: 2, max_tokens: 16, ifd_max: 1000}\n"
        "routing: {accept_at: 10, max_spread: 9, reject_at: 1, audit_rate: 0}\n"
        # one-letter instructions ("a?", "c?") are one template to semantic dedup: off here
        "semantic_dedup: {enabled: false}\n"
    )
    resources = factory_resources(str(config), str(home))
    store = AssetStore(str(home))

    first = dg.materialize(REVIEW, instance=instance, partition_key="b1", resources=resources)
    assert first.success
    validated = store.read("execution_validated", "b1")
    code_rows = [r for r in validated.to_pylist() if r["kind"] == "code"]
    reference = next(r for r in code_rows if r["provenance"]["method"] == "reference")
    assert reference["scores"]["execution"]["status"] == "passed"
    assert reference["decisions"][-1]["reason"] == "tests_passed"
    scored = store.read("difficulty_scored", "b1")
    sampled = {r["sample_id"] for r in code_rows if r["provenance"]["method"] == "response"}
    # a one-token answer is dropped: as empty, or by difficulty (truncated, or failing its tests)
    trails = {r["sample_id"]: r["decisions"] for r in scored.to_pylist()}
    assert sampled and all(any(d["verdict"] == "drop" for d in trails[s]) for s in sampled)
    checks = {e.check_name: e.passed for e in first.get_asset_check_evaluations()}
    assert {
        "seed_tasks_schema_valid",
        "candidate_responses_unique_ids",
        "judged_samples_judges_counted",
    } <= set(checks)
    assert all(checks.values())

    routed = store.read("routed_samples", "b1")
    live = [r for r in routed.to_pylist() if not any(d["verdict"] == "drop" for d in r["decisions"])]
    reasons = {r["sample_id"]: r["decisions"][-1]["reason"] for r in live}
    assert set(reasons.values()) == {"needs_review"}, reasons  # review is exercised, nothing automatic
    kept = scored.filter(pa.compute.invert(dropped_mask(scored)))
    assert len(reasons) == kept.num_rows  # every row difficulty kept

    # nothing is published before an expert decides; then: "b?"'s answer rejected, the rest accepted
    def decide(row: dict[str, Any]) -> list[dict[str, Any]]:
        return _choice("verdict", "reject" if row["messages"][0]["content"] == "b?" else "accept")

    labelled = _label(home, routed, decide)
    assert len(labelled) == len(reasons)
    curated = dg.materialize(REVIEW + CURATION, selection=CURATION, instance=instance, resources=resources)
    assert curated.success
    meta = curated.asset_materializations_for_node("sft_dataset")[0].metadata
    assert meta["version"].value == "sft@v1"
    v1 = DatasetStore(str(home)).read("sft@v1").to_pylist()
    assert {r["sample_id"] for r in v1} == {
        r["sample_id"] for r in live if r["messages"][0]["content"] != "b?"
    }
    assert all(r["decisions"][-1]["reason"] == "human_accept" for r in v1)
    second = dg.materialize(REVIEW, instance=instance, partition_key="b2", resources=resources)
    assert second.success
    # the reference answer of "a?" comes again in b2: dedup finds it among the published samples
    b2 = store.read("deduplicated_samples", "b2").to_pylist()
    again = next(r for r in b2 if r["messages"][-1]["content"] == "A")
    assert again["decisions"][-1]["reason"] == "near_duplicate_published"
    assert again["scores"]["dedup"]["jaccard"] == 1.0
    _label(home, store.read("routed_samples", "b2"), lambda row: _choice("verdict", "accept"))
    assert dg.materialize(
        REVIEW + CURATION, selection=CURATION, instance=instance, resources=resources
    ).success
    manifest = DatasetStore(str(home)).resolve("sft@latest")
    assert (manifest.version, manifest.batches, manifest.rows_removed) == (2, ["b1", "b2"], 0)
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
        resources=factory_resources(home=str(home)),
    )
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data.error
    assert failure is not None
    assert "ptf run --seeds" in str(failure.cause.message if failure.cause else failure.message)
