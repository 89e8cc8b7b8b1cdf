"""The label sensor's cost per tick: each batch's recorded config is read once a tick however many of
its rows wait to be pushed, and read again on the next tick (a batch rerun with another config is
seen). Label Studio itself is replaced by fakes here (the pusher, the puller and the client); the
sensor against the real server: tests/integration/test_labelstudio_batch_config.py."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from ptfactory.annotators.labelstudio.sync import PullResult, PushResult
from ptfactory.annotators.review_queue import ReviewQueue
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.resources import labelstudio as ls_resource
from ptfactory.assets.resources.settings import record_batch_config
from ptfactory.pipelines.sensors import human_labels_sensor
from ptfactory.storage import batch_config

ROWS = 40  # review-queue rows waiting to be pushed, alternating between the two batches


class _Client:
    def close(self) -> None:
        pass


def test_a_tick_reads_each_batch_config_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / ".ptf"
    monkeypatch.setenv("PTF_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "factory.yaml").write_text("annotation: {project_prefix: current}\n")
    for batch in ("b1", "b2"):
        (tmp_path / f"{batch}.yaml").write_text(f"annotation: {{project_prefix: {batch}-first}}\n")
        record_batch_config(str(home), batch, tmp_path / f"{batch}.yaml")

    reads: Counter[str] = Counter()
    read_bytes: Callable[..., bytes] = batch_config.Store.read_bytes

    def counted(store: Any, path: str) -> bytes:
        reads[Path(path).parent.name + "/" + Path(path).name] += 1
        return read_bytes(store, path)

    sent: list[tuple[str, str]] = []  # (batch, the review project its destination names)

    def push(queue: Any, ledger: Any, destination: Callable[[str], Any], **_: Any) -> PushResult:
        for i in range(ROWS):
            batch = ("b1", "b2")[i % 2]
            sent.append((batch, destination(batch).settings.project_prefix))
        return PushResult()

    def pull(client: Any, ledger: Any, annotation: Any, **kw: Any) -> PullResult:
        result: PullResult = kw["result"]
        return result

    monkeypatch.setattr(batch_config.Store, "read_bytes", counted)
    monkeypatch.setattr(ls_resource, "push_queue", push)
    monkeypatch.setattr(ls_resource, "pull", pull)
    monkeypatch.setattr(ls_resource.LabelStudioResource, "client", lambda self, annotation=None: _Client())
    monkeypatch.setattr(ReviewQueue, "admitted", lambda self: ["b1", "b2"])
    instance = dg.DagsterInstance.ephemeral()
    resources = factory_resources("factory.yaml")  # what the Definitions (`ptf ui`) give the sensor

    def tick() -> Any:
        reads.clear()
        sent.clear()
        with dg.build_sensor_context(instance=instance, resources=resources) as context:
            return human_labels_sensor(context)

    assert isinstance(tick(), dg.SkipReason)  # no labels: no run, the cursor stays
    # b2 recorded last: its record also governs the run (the pull's own project), read once all the same
    assert reads == {"b1/.config.json": 1, "b2/.config.json": 1, "seeds/.newest-config.json": 1}
    assert set(sent) == {("b1", "b1-first"), ("b2", "b2-first")} and len(sent) == ROWS

    # b1 reruns under another config: the next tick reads it again and sends b1's rows there
    (tmp_path / "b1.yaml").write_text("annotation: {project_prefix: b1-second}\n")
    record_batch_config(str(home), "b1", tmp_path / "b1.yaml")
    tick()
    assert reads == {"b1/.config.json": 1, "b2/.config.json": 1, "seeds/.newest-config.json": 1}
    assert set(sent) == {("b1", "b1-second"), ("b2", "b2-first")}
