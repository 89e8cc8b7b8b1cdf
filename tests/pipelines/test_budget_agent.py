"""Agent rollouts under a budget, through Dagster for real (the bundled SmolLM2, the Docker sandbox,
the demo's first task): the engine stops sending at the limit and the stage records that it stopped."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from ptfactory.assets.agent import agent_tasks, agent_trajectories
from ptfactory.assets.resources import factory_resources
from ptfactory.engines.budget import BUDGET_TAG, BudgetLedger
from ptfactory.storage.assetstore import AssetStore

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_agent_rollouts_stop_at_the_budget(
    home: Path, tmp_path: Path, smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text((REPO / "demo" / "agent" / "tasks.jsonl").read_text().splitlines()[0] + "\n")
    config = tmp_path / "factory.yaml"
    config.write_text(
        f"engines:\n  generator: {{model: {smollm2}}}\n"
        "sandbox: {workers: 2}\n"
        "agent: {tasks: [tasks.jsonl], rollouts: 2, max_steps: 3, max_tokens: 24}\n"
    )
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PTF_ENGINE_CALL_LOG", str(log))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b1"])
    result = dg.materialize(
        [agent_tasks, agent_trajectories],
        instance=instance,
        partition_key="b1",
        resources=factory_resources(str(config), str(home)),
        tags={BUDGET_TAG: json.dumps({"tokens": 1})},  # what `ptf run --budget tokens=1` sets
    )
    assert result.success
    # the first step (both episodes' one conversation, n=2) went out; the second was refused
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["sent", "done"]
    meta = result.asset_materializations_for_node("agent_trajectories")[0].metadata
    assert meta["budget_exhausted"].value is True and meta["budget_unfinished_tasks"].value == 1
    assert meta["budget_spent_tokens"].value > 0 and meta["budget_tokens"].value == 1
    ledger = BudgetLedger(home / "budget.sqlite")
    assert [asset for asset, _ in ledger.stops(result.run_id)] == ["agent_trajectories"]
    assert AssetStore(str(home)).read("agent_trajectories", "b1").num_rows == 0  # none finished
