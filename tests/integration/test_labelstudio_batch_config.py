"""The config a batch ran with belongs to the batch (issue 39 item 1), against the real Label Studio.

A batch recorded the demo's factory.yaml (demo/factory.yaml, pointed at this Label Studio) when it
ran; the project's factory.yaml is now another one (other dataset names, another review project,
other split and shard settings). Pushing, the label sensor, the UI's curation job and
`ptf annotate pull` all act under the batch's config: one expert `accept` publishes sft@v2 under the
batch's config hash through the delta path, and a curation that changes no row publishes nothing."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.resources.settings import record_batch_config
from ptfactory.assets.scoring import routed_samples
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.versions import DatasetStore
from tests.conftest import PTF, REPO
from tests.integration.conftest import LabelStudio
from tests.integration.test_labelstudio import Annotator, _choice

pytestmark = pytest.mark.integration

BATCH = "cfg-demo"
PREFIX = "batch-config"


def _judged() -> list[dict[str, Any]]:
    """Thirty answers the judges agree are good (enough that the split holds some out), two they
    dispute, two preference pairs the sandbox vouches for."""
    rows: list[dict[str, Any]] = []
    for i in range(34):
        prompt = [{"role": "user", "content": f"batch-config task {i}: name a prime above {10 * i}."}]
        answer = [{"role": "assistant", "content": f"The first prime above {10 * i} (task {i})."}]
        votes = (9.0, 9.0) if i < 30 else (8.0, 3.0)
        row: dict[str, Any] = {"batch": BATCH, "kind": "sft", "messages": prompt + answer}
        if i >= 32:  # no judge scores these pairs
            row.update(kind="preference", messages=prompt, chosen=answer)
            row["rejected"] = [{"role": "assistant", "content": "9 is prime."}]
            row["provenance"] = {"method": "agent_pair"}
            row["sample_id"] = sample_id("preference", prompt, chosen=answer, rejected=row["rejected"])
        else:
            row["sample_id"] = sample_id("sft", row["messages"])
            row["scores"] = {
                "judges": [
                    {"judge": "a", "model": "m", "score": votes[0], "parsed": True},
                    {"judge": "b", "model": "n", "score": votes[1], "parsed": True},
                ],
                "judge_mean": sum(votes) / 2,
                "judge_spread": abs(votes[0] - votes[1]),
                "judge_votes": 2,
            }
        row["decisions"] = [{"stage": "judge", "verdict": "keep", "reason": "judged", "detail": None}]
        rows.append(row)
    return rows


def test_curation_acts_under_the_batchs_config(
    label_studio: LabelStudio, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ls = label_studio
    # a project of its own (home, Dagster instance), on the session's Label Studio
    root = tmp_path / "project"
    (root / "configs").mkdir(parents=True)
    shutil.copy(REPO / "dagster.yaml", root / "dagster.yaml")
    demo = (REPO / "demo" / "factory.yaml").read_text()
    batch_config = root / "configs" / "demo.yaml"
    batch_config.write_text(demo + f"annotation: {{port: {ls.port}, project_prefix: {PREFIX}}}\n")
    # what is current now: another config, which must not touch this batch
    current = "datasets: {sft: other-sft, preference: other-pref, validation_fraction: 0.5}\n"
    current += f"storage: {{shard_rows: 3}}\nannotation: {{port: {ls.port}, project_prefix: wrong-project}}\n"
    (root / "factory.yaml").write_text(current)
    home = root / ".ptf"
    env = {**ls.env, "PTF_LS_TOKEN": ls.admin_token()}
    monkeypatch.setenv("PTF_LS_TOKEN", env["PTF_LS_TOKEN"])
    monkeypatch.setenv("PTF_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(root))
    monkeypatch.chdir(root)

    def ptf(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*PTF, *args], cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    # the batch ran with the demo's config: `ptf run --config configs/demo.yaml` records it so
    recorded = record_batch_config(str(home), BATCH, batch_config)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("batch", [BATCH])
    AssetStore(str(home)).write("judged_samples", from_records(_judged()), BATCH)
    judged = dg.AssetSpec("judged_samples", partitions_def=batch_partitions).with_io_manager_key("samples_io")
    resources = factory_resources("factory.yaml")  # what the Definitions (`ptf ui`) use
    assert dg.materialize(
        [judged, routed_samples], instance=instance, partition_key=BATCH, resources=resources
    ).success

    pushed = ptf("annotate", "push")
    # the two disputed answers, in the batch's review project (not the current config's)
    assert f"{PREFIX}: sft queue at" in pushed.stdout and "wrong-project" not in pushed.stdout
    first = ptf("annotate", "pull")  # publishes the accepted rows, under the batch's config
    store = DatasetStore(str(home))
    assert store.versions("sft") == [1] and store.versions("preference") == [1]
    assert not store.versions("other-sft") and not store.versions("other-pref"), first.stdout
    v1 = store.manifest("sft", 1)
    assert sorted(v1.splits) == ["train", "validation"]  # the demo's split (the delta path needs one)
    assert v1.config_hash == recorded.hash and v1.stats["batch_configs"] == {BATCH: recorded.hash}

    with sqlite3.connect(home / "annotation" / "ledger.sqlite") as db:
        tasks = [t for (t,) in db.execute("SELECT task_id FROM pushed WHERE queue = 'sft' ORDER BY task_id")]
    assert len(tasks) == 2
    task = tasks[0]
    Annotator(ls, "ann1@example.com").annotate(task, [_choice("verdict", "response", "accept")])

    # the label sensor and the curation run it starts, as `ptf ui` runs them
    from ptfactory.pipelines.definitions import defs
    from ptfactory.pipelines.sensors import human_labels_sensor

    with dg.build_sensor_context(instance=instance, resources=resources) as context:
        sensed = human_labels_sensor(context)
    assert isinstance(sensed, dg.SensorResult) and len(sensed.run_requests or []) == 1
    run = defs.resolve_job_def("curation").execute_in_process(
        instance=instance, tags=sensed.run_requests[0].tags
    )
    assert run.success
    meta = run.asset_materializations_for_node("sft_dataset")[0].metadata
    assert meta["version"].value == "sft@v2"
    assert str(meta["publish"].value).startswith("delta: 1 row(s) in, 0 out"), meta["publish"].value
    v2 = store.manifest("sft", 2)
    assert (v2.config_hash, v2.rows, v2.stats["batch_configs"]) == (
        recorded.hash,
        v1.rows + 1,
        {BATCH: recorded.hash},
    )
    assert store.versions("preference") == [1]  # its rows did not change: no new version

    again = ptf("annotate", "pull")  # nothing changed: nothing is published
    assert "unchanged, still sft@v2" in again.stdout and "unchanged, still preference@v1" in again.stdout
    assert store.versions("sft") == [1, 2] and store.versions("preference") == [1]
    assert not (home / "datasets" / "other-sft").exists()
    # each batch's config hash is in the manifest beside the version's
    body = json.loads((home / "datasets" / "sft" / "v2" / "manifest.json").read_text())
    assert body["config_hash"] == recorded.hash and body["stats"]["batch_configs"] == {BATCH: recorded.hash}
    assert os.environ["PTF_HOME"] == str(home)
