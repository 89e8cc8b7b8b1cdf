"""factory.yaml's ``seeds.procedural`` on the path a batch takes: the ``seed_tasks`` asset adds the
section's reasoning-gym tasks to the staged seed files, each carrying its family for the procedural
verifier, and a rerun draws the same tasks."""

import json
from pathlib import Path

import dagster as dg
import pytest

from ptfactory.assets.resources import factory_resources
from ptfactory.assets.seeds import seed_tasks
from ptfactory.config import load_config
from ptfactory.errors import ConfigError
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.seedstore import SeedStore


def _materialize(home: Path, config: Path) -> list[dict]:
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b1"])
    result = dg.materialize(
        [seed_tasks],
        instance=instance,
        partition_key="b1",
        resources=factory_resources(config_path=str(config), home=str(home)),
    )
    assert result.success
    return AssetStore(str(home)).read("seed_tasks", "b1").to_pylist()


def test_the_section_adds_its_tasks_to_a_batch(home: Path, tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps({"instruction": "Name a color."}) + "\n")
    SeedStore(str(home)).stage([seeds], "b1")
    config = tmp_path / "factory.yaml"
    config.write_text("seeds:\n  procedural: {datasets: [basic_arithmetic, chain_sum], count: 3, seed: 7}\n")

    rows = _materialize(home, config)
    procedural = [r for r in rows if r["reference"] and r["reference"]["source"] == "procedural"]
    assert len(rows) == 7 and len(procedural) == 6
    assert sorted({r["reference"]["family"] for r in procedural}) == ["basic_arithmetic", "chain_sum"]
    assert all("<answer>" in r["messages"][-1]["content"] for r in procedural)
    # the same seed draws the same tasks: a rerun of the batch keeps its ids
    again = _materialize(home, config)
    assert sorted(r["sample_id"] for r in again) == sorted(r["sample_id"] for r in rows)


def test_a_denied_family_is_a_config_error_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "factory.yaml"
    config.write_text("seeds:\n  procedural: {datasets: [gsm_symbolic]}\n")
    with pytest.raises(ConfigError, match="gsm_symbolic"):
        load_config(config)
