"""The same definitions under Dagster's multiprocess executor: two batches at once, their dedup steps
in separate processes reading one shared index of published samples, give exactly what the
in-process executor gives one batch after the other."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from ptfactory.assets.dedup import deduplicated_samples
from ptfactory.assets.generation import candidate_instructions, candidate_responses
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.seeds import seed_tasks
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.seedstore import SeedStore
from tests.conftest import REPO
from tests.pipelines.test_definitions import GRAPH

pytestmark = pytest.mark.integration

UP_TO_DEDUP = [seed_tasks, candidate_instructions, candidate_responses, deduplicated_samples]
SEEDS = {
    "b1": [
        {"instruction": "a?", "response": "A shared answer about apples"},
        {"instruction": "b?", "response": "B"},
    ],
    "b2": [
        {"instruction": "a?", "response": "A shared answer about apples"},
        {"instruction": "c?", "response": "C"},
    ],
    "b3": [
        {"instruction": "d?", "response": "D"},
        {"instruction": "a?", "response": "A shared answer about apples"},
    ],
}


def multiprocess_job() -> dg.JobDefinition:
    """Module-level, so the executor's step processes can rebuild it (``dg.reconstructable``)."""
    from ptfactory.pipelines.definitions import defs

    job = dg.define_asset_job(
        "mp_up_to_dedup",
        selection=dg.AssetSelection.assets(*UP_TO_DEDUP),
        executor_def=dg.multiprocess_executor.configured({"max_concurrent": 2}),
    )
    return dg.Definitions(assets=defs.assets, resources=defs.resources, jobs=[job]).resolve_job_def(
        "mp_up_to_dedup"
    )


_CHILD = """
import json, sys
import dagster as dg
from tests.pipelines.test_multiprocess import multiprocess_job
with dg.execute_job(
    dg.reconstructable(multiprocess_job),
    instance=dg.DagsterInstance.get(),
    run_config=json.loads(sys.argv[2]),
    tags={"dagster/partition": sys.argv[1]},
) as result:
    sys.exit(0 if result.success else 1)
"""


def _config(tmp: Path, model: Path) -> Path:
    path = tmp / "factory.yaml"
    path.write_text(
        f"engines:\n  generator: {{model: {model}}}\n"
        "generation: {self_instruct: {count: 0}, evol_instruct: {count: 0}, code: {count: 0},"
        " responses: {max_tokens: 2, temperature: 0}}\n"
        "difficulty: {k: 2, max_tokens: 16, ifd_max: 1000}\n"
        "judges: [{name: execution, type: execution}]\n"
        "routing: {accept_at: 1, max_spread: 9, reject_at: 1, silent: accept, audit_rate: 0}\n"
    )
    return path


def _stage(home: Path, tmp: Path) -> None:
    for batch, rows in SEEDS.items():
        path = tmp / f"{batch}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        SeedStore(str(home)).stage([path], batch)


def _rows(home: Path, batch: str) -> list[dict[str, Any]]:
    rows = AssetStore(str(home)).read("deduplicated_samples", batch).to_pylist()
    return sorted(
        ((r["sample_id"], r["decisions"][-1]["reason"], r["scores"]["dedup"]) for r in rows),  # type: ignore[misc]
        key=lambda item: item[0],
    )


def test_multiprocess_two_batches_match_in_process(tmp_path: Path, tiny_model: Path) -> None:
    config = _config(tmp_path, tiny_model)
    serial = tmp_path / "serial"
    _stage(serial, tmp_path)
    resources = factory_resources(str(config), str(serial))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", list(SEEDS))
    # b1 is published first: the index both later batches are deduplicated against
    assert dg.materialize(GRAPH, instance=instance, partition_key="b1", resources=resources).success
    parallel = tmp_path / "parallel"
    shutil.copytree(serial, parallel)
    for batch in ("b2", "b3"):
        assert dg.materialize(
            UP_TO_DEDUP, instance=instance, partition_key=batch, resources=resources
        ).success

    run_config = {
        "resources": {
            "settings": {"config": {"home": str(parallel), "config_path": str(config)}},
            "samples_io": {"config": {"home": str(parallel)}},
        }
    }
    # two runs at once, each in its own process (Dagster's logging set-up is not thread-safe), each
    # fanning its steps out to processes of their own
    dagster_home = tmp_path / "instance"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    env.pop("PTF_HOME", None)
    with dg.DagsterInstance.from_config(str(dagster_home)) as persistent:
        persistent.add_dynamic_partitions("batch", list(SEEDS))
    children = {
        batch: subprocess.Popen(
            [sys.executable, "-c", _CHILD, batch, json.dumps(run_config)], cwd=REPO, env=env
        )
        for batch in ("b2", "b3")
    }
    outcomes = {batch: child.wait(timeout=900) == 0 for batch, child in children.items()}
    assert outcomes == {"b2": True, "b3": True}
    for batch in ("b2", "b3"):
        assert _rows(parallel, batch) == _rows(serial, batch)
    # the shared answer was published with b1: both later batches found it in the index
    for batch in ("b2", "b3"):
        reasons = [reason for _, reason, _ in _rows(parallel, batch)]
        assert "near_duplicate_published" in reasons
