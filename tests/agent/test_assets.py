"""The agent stages through Dagster for real: a tiny random model as the policy (SmolLM2 drives
episodes in test_rollouts_model.py), the Docker sandbox,
the demo's first task with its reference solution; every trajectory replayed; then the rows made of
them through dedup, execution validation and difficulty."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from faker import Faker

from ptfactory.assets.agent import agent_tasks, agent_trajectories
from ptfactory.assets.decontamination import decontaminated_samples
from ptfactory.assets.dedup import deduplicated_samples
from ptfactory.assets.execution import execution_validated
from ptfactory.assets.generation import candidate_instructions, candidate_responses
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.scoring import difficulty_scored
from ptfactory.assets.seeds import seed_tasks
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import empty_table, validate_table

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_agent_trajectories_asset(home: Path, tmp_path: Path, tiny_model: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    task = json.loads((REPO / "demo" / "agent" / "tasks.jsonl").read_text().splitlines()[0])
    # a maintainer's address in the code: the reference episode reads calc.py, so its tool output holds it
    planted = Faker("en_US").email()
    calc = task["files"]["calc.py"]
    task["files"]["calc.py"] = calc.replace('"""\n', f'\n\nMaintainer: {planted}\n"""\n', 1)
    assert planted in task["files"]["calc.py"]
    tasks.write_text(json.dumps(task) + "\n")
    config = tmp_path / "factory.yaml"
    config.write_text(
        f"engines:\n  generator: {{model: {tiny_model}}}\n"
        "sandbox: {workers: 2}\n"
        "agent: {tasks: [tasks.jsonl], rollouts: 2, max_steps: 1, max_tokens: 24}\n"
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b1"])
    resources = factory_resources(str(config), str(home))
    result = dg.materialize(
        [agent_tasks, agent_trajectories], instance=instance, partition_key="b1", resources=resources
    )
    assert result.success
    meta = result.asset_materializations_for_node("agent_trajectories")[0].metadata
    figures = {k: v.value for k, v in meta.items() if k in ("episodes", "reference_episodes", "replayed")}
    assert figures == {"episodes": 2, "reference_episodes": 1, "replayed": figures["replayed"]}
    assert meta["replay_rate"].value == 1.0
    assert meta["mean_steps"].value == 1.0 and meta["sandbox_seconds"].value > 0
    store = AssetStore(str(home))
    table = store.read("agent_trajectories", "b1")
    validate_table(table)
    rows = table.to_pylist()
    # the stored episodes keep no raw personal data: redacted, with the type and count in a decision
    assert planted not in json.dumps(rows, default=str) and meta["rows_redacted"].value >= 1
    agents = [r for r in rows if r["kind"] == "agent"]
    reference = [r for r in agents if r["provenance"]["engine"] == "reference"]
    assert len(reference) == 1 and reference[0]["outcome"]["solved"]
    model_steps = [s for r in agents if r not in reference for s in r["steps"]]
    parsed = sum(s["kind"] != "unparsable" for s in model_steps) / len(model_steps)
    assert meta["tool_call_parse_rate"].value == pytest.approx(parsed, abs=1e-4)
    print(  # the figures, in the test log (-s)
        "agent asset: solve rate", meta["solve_rate"].value, "parse rate", meta["tool_call_parse_rate"].value,
        "replay rate", meta["replay_rate"].value, "sft", meta["sft_rows"].value, "pairs",
        meta["preference_pairs"].value,
    )  # fmt: skip
    if meta["solve_rate"].value < 1:  # the model failed at least once: the reference makes a pair
        pairs = [r for r in rows if r["kind"] == "preference"]
        assert pairs and all(p["provenance"]["parent_id"] == reference[0]["sample_id"] for p in pairs)
        sft = [r for r in rows if r["kind"] == "sft"]
        assert reference[0]["sample_id"] in {r["provenance"]["parent_id"] for r in sft}
    assert all(r["scores"]["difficulty"]["method"] == "solve_rate" for r in agents)

    # a rerun of the batch keeps its episodes (tool output such as unittest's timing would send the
    # model new prompts, and a rerun would publish new trajectories); a changed setting runs them again
    again = dg.materialize(
        [agent_tasks, agent_trajectories], instance=instance, partition_key="b1", resources=resources
    )
    assert "reused" in again.asset_materializations_for_node("agent_trajectories")[0].metadata
    assert store.read("agent_trajectories", "b1").equals(table)
    config.write_text(config.read_text().replace("max_tokens: 24", "max_tokens: 23"))
    changed = dg.materialize(
        [agent_tasks, agent_trajectories],
        instance=instance,
        partition_key="b1",
        resources=factory_resources(str(config), str(home)),
    )
    assert "reused" not in changed.asset_materializations_for_node("agent_trajectories")[0].metadata
    config.write_text(config.read_text().replace("max_tokens: 23", "max_tokens: 24"))
    table = store.read("agent_trajectories", "b1")
    rows = table.to_pylist()

    # they join the batch's responses (none here) at dedup, and difficulty keeps their solve rate
    store.write("candidate_responses", empty_table(), "b1")
    stages = [deduplicated_samples, decontaminated_samples, execution_validated, difficulty_scored]
    later = dg.materialize(
        [seed_tasks, candidate_instructions, candidate_responses, *stages],
        selection=stages,
        instance=instance,
        partition_key="b1",
        resources=resources,
    )
    assert later.success
    scored = {r["sample_id"]: r for r in store.read("difficulty_scored", "b1").to_pylist()}
    assert set(scored) == {r["sample_id"] for r in rows}
    for row in rows:
        after = scored[row["sample_id"]]
        assert after["scores"]["difficulty"] == row["scores"]["difficulty"]
        dropped = any(d["verdict"] == "drop" for d in row["decisions"])
        drops = [d["reason"] for d in after["decisions"] if d["verdict"] == "drop"]
        if row["kind"] != "sft":  # episodes and pairs pass dedup; sft rows may be near duplicates
            assert dropped == bool(drops), after["decisions"]
        elif not dropped:
            assert set(drops) <= {"near_duplicate", "exact_duplicate"}, drops
