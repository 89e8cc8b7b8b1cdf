"""judged_samples in the factory's own path (the real Dagster asset, the real panel): the batch's
verifier verdicts and each judge's batch weight in the asset's metadata, the measurements kept in
the calibration store under the judge's identity, and an agent episode whose record claims success
replayed in the real Docker sandbox (the agent verifier fails it: its final state fails the check)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from ptfactory.annotators.judges import CalibrationStore
from ptfactory.assets.judging import judged_samples
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import factory_resources
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.episode import EpisodePool
from ptfactory.filters.execution.limits import Limits
from ptfactory.generators.agent.record import complete_record, trajectory_table
from ptfactory.generators.agent.reference import ReferenceEngine
from ptfactory.generators.agent.rollout import RolloutConfig, run_rollouts
from ptfactory.generators.agent.tasks import read_tasks
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import conform, from_records, sample_id

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TASK = next(t for t in read_tasks(REPO / "demo" / "agent" / "tasks.jsonl") if t.id == "fix-failing-test")
WRONG_FIX = TASK.files["calc.py"].replace("(len(values) + 1)", "(len(values) - 1 or 1)")


def _math_rows() -> list[dict[str, Any]]:
    """Ten generated answers to word problems with a reference: five right, five wrong (the answer
    verifier decides them; the judge is weighed on them)."""
    rows = []
    for i in range(10):
        a, b = 3 + i, 7 + 2 * i
        right = i % 2 == 0
        said = a + b if right else a + b + 5
        messages = [
            {"role": "user", "content": f"Tom has {a} apples and buys {b} more. How many apples now?"},
            {"role": "assistant", "content": f"He has {a} + {b} = {said} apples. The answer is {said}."},
        ]
        rows.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": "b",
                "kind": "sft",
                "messages": messages,
                "reference": {"answer": str(a + b), "source": "seed"},
                "provenance": {"method": "self_instruct", "model": "other-model-1b"},
                "decisions": [{"stage": "seed", "verdict": "keep", "reason": "test", "detail": None}],
            }
        )
    return rows


def _lying_episode() -> dict[str, Any]:
    """A wrong fix through the real rollout loop, its record then claiming the task solved."""
    wrong = dataclasses.replace(
        TASK,
        instruction=TASK.instruction + " (wrong)",
        solution=[{"name": "write_file", "arguments": {"path": "calc.py", "content": WRONG_FIX}}],
    )
    with DockerSandbox(Limits(timeout_s=10), workers=1) as box:
        rows = run_rollouts([wrong], ReferenceEngine([wrong]), EpisodePool(box), RolloutConfig(rollouts=1))
    row = complete_record(rows[0])
    assert row["outcome"]["solved"] is False
    row["outcome"]["solved"] = True  # what the replay must see through
    table, _ = trajectory_table([row])
    return table.to_pylist()[0]


def test_weights_verdicts_and_the_agent_replay(home: Path, tmp_path: Path, tiny_model: Path) -> None:
    episode = _lying_episode()
    table = pa.concat_tables([conform(from_records(_math_rows())), conform(from_records([episode]))])
    AssetStore(str(home)).write("difficulty_scored", table, "b")
    config = tmp_path / "factory.yaml"
    config.write_text(
        f"engines:\n  generator: {{model: {tiny_model}}}\n"
        f"judges:\n  - {{name: tiny, type: llm, engine: {{model: {tiny_model}}}, scoring: likelihood}}\n"
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b"])
    upstream = dg.AssetSpec("difficulty_scored", partitions_def=batch_partitions).with_io_manager_key(
        "samples_io"
    )
    result = dg.materialize(
        [upstream, judged_samples],
        instance=instance,
        partition_key="b",
        resources=factory_resources(str(config), str(home)),
    )
    assert result.success
    meta = result.asset_materializations_for_node("judged_samples")[0].metadata

    # the verifiers' verdicts and the judge's weight measured on the ten labelled generated rows
    verdicts = meta["verifier_verdicts"].value
    assert verdicts["answer"] == {"pass": 5, "fail": 5}
    assert verdicts["agent"] == {"fail": 1}
    weight = meta["judge_weights"].value["tiny"]
    # negatives: the five wrong answers and the failing episode (a generated row a verifier failed)
    assert (weight["source"], weight["positives"], weight["negatives"]) == ("batch", 5, 6)
    assert weight["auc"] is not None and weight["flagged"] == (weight["auc"] < 0.55)
    assert meta["verifier_labelled_rows"].value == "5+/6-"

    # ... kept in the calibration store under the judge's identity, for batches without labels
    store = json.loads((home / "calibration" / "judges.json").read_text())
    key = store["names"]["tiny"]
    assert store["entries"][key]["batches"]["b"]["auc"] == weight["auc"]
    assert CalibrationStore.under(home).persisted(key) is not None

    # the episode's final state replayed in the sandbox: its check fails, whatever the record says
    judged = AssetStore(str(home)).read("judged_samples", "b").to_pylist()
    agent = next(r for r in judged if r["kind"] == "agent")
    mine = [v for v in agent["scores"]["verifiers"] if v["verifier"] == "agent"]
    assert [(v["verdict"], v["reason"]) for v in mine] == [("fail", "check_failed")]
