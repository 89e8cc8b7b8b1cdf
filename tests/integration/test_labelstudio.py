"""Against a real Label Studio (started by `ptf annotate up`): push 100 routed rows, label them as
separate annotator accounts through the API, let the sensor pull, and check curated_samples row by
row; a second push adds nothing; a server stopped mid-pull loses and duplicates nothing."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pyarrow as pa
import pytest

from ptfactory.annotators.labelstudio.client import LabelStudioClient
from ptfactory.annotators.labelstudio.ledger import Ledger
from ptfactory.annotators.labelstudio.server import LabelStudioServer
from ptfactory.annotators.labelstudio.settings import AnnotationConfig
from ptfactory.annotators.labelstudio.sync import pull
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.scoring import routed_samples
from ptfactory.errors import AnnotationError
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import from_records, sample_id
from tests.integration.conftest import LabelStudio, ls_yaml

pytestmark = pytest.mark.integration

BATCH = "review-b1"


def _routed_rows(batch: str, tag: str = "") -> pa.Table:
    """80 SFT, 10 code and 10 preference rows, all routed to review, with two judges' votes."""
    records = []
    for i in range(100):
        kind = "sft" if i < 80 else "code" if i < 90 else "preference"
        prompt = [{"role": "user", "content": f"{tag}Task {i}: explain item {i} in one line."}]
        answer = {"role": "assistant", "content": f"Item {i} is explained like this."}
        row: dict[str, Any] = {"batch": batch, "kind": kind}
        if kind == "preference":
            row["messages"] = prompt
            row["chosen"] = [{"role": "assistant", "content": f"Good answer {i}."}]
            row["rejected"] = [{"role": "assistant", "content": f"Weak answer {i}."}]
            row["sample_id"] = sample_id(kind, prompt, chosen=row["chosen"], rejected=row["rejected"])
        else:
            row["messages"] = [*prompt, answer]
            row["sample_id"] = sample_id(kind, row["messages"])
        if kind == "code":
            row["tests"] = "def check(candidate):\n    assert candidate(1) == 2\n"
            row["entry_point"] = "f"
        row["scores"] = {
            "judge_votes": 2,
            "judges": [
                {
                    "judge": "llm",
                    "model": "m",
                    "score": 8.0,
                    "verdict": None,
                    "rationale": "fine",
                    "raw": "8",
                    "parsed": True,
                },
                {
                    "judge": "embed",
                    "model": "e",
                    "score": 3.0,
                    "verdict": None,
                    "rationale": None,
                    "raw": None,
                    "parsed": True,
                },
            ],
            "judge_mean": 5.5,
            "judge_spread": 5.0,
        }
        row["decisions"] = [{"stage": "judge", "verdict": "keep", "reason": "judged", "detail": None}]
        records.append(row)
    return from_records(records)


def _stage(ls: LabelStudio, table: pa.Table, batch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judged rows of ``batch``, routed the way a run routes them (into the review queue)."""
    monkeypatch.setenv("PTF_HOME", str(ls.home))
    monkeypatch.setenv("DAGSTER_HOME", str(ls.root))
    monkeypatch.chdir(ls.root)
    AssetStore(str(ls.home)).write("judged_samples", table, batch)
    instance = dg.DagsterInstance.get()
    if not instance.has_dynamic_partition("batch", batch):
        instance.add_dynamic_partitions("batch", [batch])
    judged = dg.AssetSpec("judged_samples", partitions_def=batch_partitions).with_io_manager_key("samples_io")
    routed = dg.materialize(
        [judged, routed_samples],
        selection=[routed_samples],
        instance=instance,
        partition_key=batch,
        resources=factory_resources(str(ls.root / "factory.yaml"), str(ls.home)),
    )
    assert routed.success


def _task_ids(ls: LabelStudio) -> dict[str, int]:
    with sqlite3.connect(ls.home / "annotation" / "ledger.sqlite") as db:
        return {sid: tid for sid, tid in db.execute("SELECT sample_id, task_id FROM pushed")}


def _choice(name: str, to: str, value: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": to, "type": "choices", "value": {"choices": [value]}}


def _corrected(text: str) -> dict[str, Any]:
    return {"from_name": "corrected", "to_name": "response", "type": "textarea", "value": {"text": [text]}}


class Annotator:
    def __init__(self, ls: LabelStudio, email: str) -> None:
        self.http = httpx.Client(
            base_url=ls.url, headers={"Authorization": f"Token {ls.annotators[email]['token']}"}, timeout=60
        )

    def annotate(self, task: int, result: list[dict[str, Any]]) -> int:
        response = self.http.post(
            f"/api/tasks/{task}/annotations/", json={"result": result, "lead_time": 4.0}
        )
        assert response.status_code == 201, response.text
        return int(response.json()["id"])

    def update(self, annotation: int, result: list[dict[str, Any]]) -> None:
        response = self.http.patch(f"/api/annotations/{annotation}/", json={"result": result})
        assert response.status_code == 200, response.text

    def delete(self, annotation: int) -> None:
        assert self.http.delete(f"/api/annotations/{annotation}/").status_code == 204


def _expected_and_label(ls: LabelStudio, table: pa.Table) -> dict[str, tuple[str, str | None]]:
    """Label every row by a fixed plan; returns sample_id -> (expected outcome, corrected text)."""
    ids = _task_ids(ls)
    ann1, ann2 = Annotator(ls, "ann1@example.com"), Annotator(ls, "ann2@example.com")
    expected: dict[str, tuple[str, str | None]] = {}
    for i, row in enumerate(table.to_pylist()):
        task = ids[row["sample_id"]]
        sid = row["sample_id"]
        if row["kind"] == "preference":
            pick = ("A", "B", "tie")[i % 3]
            ann1.annotate(task, [_choice("preference", "response_a", pick)])
            expected[sid] = ({"A": "kept", "B": "swapped", "tie": "dropped"}[pick], None)
            continue
        plan = i % 5
        if i == 7:  # rejected, then changed to accepted: the update supersedes
            first = ann1.annotate(task, [_choice("verdict", "response", "reject")])
            ann1.update(first, [_choice("verdict", "response", "accept")])
            expected[sid] = ("accepted", None)
        elif i == 9:  # accepted, then deleted: back to waiting
            ann1.delete(ann1.annotate(task, [_choice("verdict", "response", "accept")]))
            expected[sid] = ("awaiting", None)
        elif plan == 0:
            ann1.annotate(task, [_choice("verdict", "response", "accept")])
            if i % 10 == 0:
                ann2.annotate(task, [_choice("verdict", "response", "accept")])
            expected[sid] = ("accepted", None)
        elif plan == 1:
            ann1.annotate(task, [_choice("verdict", "response", "reject")])
            expected[sid] = ("dropped", None)
        elif plan == 2 and row["kind"] == "sft":
            fixed = f"A corrected answer for row {i}."
            ann1.annotate(task, [_choice("verdict", "response", "accept"), _corrected(fixed)])
            expected[sid] = ("corrected", fixed)
        elif plan == 3:  # the two annotators disagree: nothing decided yet
            ann1.annotate(task, [_choice("verdict", "response", "accept")])
            ann2.annotate(task, [_choice("verdict", "response", "reject")])
            expected[sid] = ("awaiting", None)
        else:
            expected[sid] = ("awaiting", None)
    return expected


def test_push_label_sense_curate(label_studio: LabelStudio, monkeypatch: pytest.MonkeyPatch) -> None:
    ls = label_studio
    table = _routed_rows(BATCH)
    _stage(ls, table, BATCH, monkeypatch)

    pushed = ls.ptf("annotate", "push", "--batch", BATCH)
    assert pushed.returncode == 0, pushed.stderr[-3000:]
    assert "100 tasks created, 0 already" in pushed.stdout
    again = ls.ptf("annotate", "push", "--batch", BATCH)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 tasks created, 100 already" in again.stdout
    client = LabelStudioClient(ls.url, ls.admin_token())
    counts = {
        q: client.task_count(client.find_project("ptf review", q) or -1)
        for q in ("sft", "code", "preference")
    }
    assert counts == {"sft": 80, "code": 10, "preference": 10}

    expected = _expected_and_label(ls, table)

    from ptfactory.pipelines.definitions import defs
    from ptfactory.pipelines.sensors import human_labels_sensor

    factory = factory_resources(str(ls.root / "factory.yaml"))
    instance = dg.DagsterInstance.get()
    with dg.build_sensor_context(instance=instance, cursor=None, resources=factory) as context:
        result = human_labels_sensor(context)
    assert isinstance(result, dg.SensorResult)
    assert len(result.run_requests or []) == 1
    # a second evaluation with the new cursor finds nothing new
    with dg.build_sensor_context(instance=instance, cursor=result.cursor, resources=factory) as again:
        assert isinstance(human_labels_sensor(again), dg.SkipReason)

    run = defs.resolve_job_def("curation").execute_in_process(
        instance=instance, resources=factory, tags=result.run_requests[0].tags
    )
    assert run.success
    curated = AssetStore(str(ls.home)).read("curated_samples").to_pylist()
    by_id = {r["sample_id"]: r for r in curated if r["kind"] != "preference" or r["sample_id"] in expected}
    pairs = [r for r in curated if r["kind"] == "preference" and r["sample_id"] not in expected]
    original = {r["sample_id"]: r for r in table.to_pylist()}
    for sid, (outcome, fixed) in expected.items():
        row = by_id[sid]
        review = [d for d in row["decisions"] if d["stage"] == "review"]
        if outcome == "awaiting":
            assert review == [], (sid, review)
        elif outcome == "dropped":
            assert review[-1]["verdict"] == "reject"
        elif outcome in ("accepted", "kept"):
            assert review[-1]["verdict"] == "accept"
            assert row["messages"] == original[sid]["messages"]
            assert row["chosen"] == original[sid]["chosen"]
        elif outcome == "swapped":
            assert review[-1]["verdict"] == "accept"
            assert row["chosen"] == original[sid]["rejected"]
            assert row["rejected"] == original[sid]["chosen"]
        elif outcome == "corrected":
            assert review[-1]["verdict"] == "edit"
            assert row["messages"][-1]["content"] == fixed
            assert json.loads(review[-1]["detail"])["original"] == original[sid]["messages"][-1]["content"]
            assert row["annotation"]["edited_response"] == fixed
            assert row["annotation"]["annotator"] == "ann1@example.com"
    corrected = {sid for sid, (o, _) in expected.items() if o == "corrected"}
    assert len(pairs) == len(corrected) == 15
    assert {p["provenance"]["parent_id"] for p in pairs} == corrected

    materialized = {
        event.asset_key.to_user_string(): event.step_materialization_data.materialization.metadata  # type: ignore[union-attr]
        for event in run.get_asset_materialization_events()
        if event.asset_key
    }
    curated_meta = materialized["curated_samples"]
    assert curated_meta["multi_annotated_samples"].value == 9 + 18  # agreeing pairs + disagreeing pairs
    assert "inter_annotator_alpha" in curated_meta
    assert "judge_human_agreement" in curated_meta
    # every decided SFT/code row that was accepted or corrected is published; awaiting rows are not
    sft = materialized["sft_dataset"]
    assert sft["dagster/row_count"].value == sum(
        1 for o, _ in expected.values() if o in ("accepted", "corrected")
    )
    assert materialized["preference_dataset"]["dagster/row_count"].value == 15 + 7  # pairs + A/B choices


def test_server_stopped_mid_pull_loses_nothing(
    label_studio: LabelStudio, monkeypatch: pytest.MonkeyPatch
) -> None:
    ls = label_studio
    batch = "review-restart"
    table = _routed_rows(batch, tag="restart ")
    (ls.root / "factory.yaml").write_text(ls_yaml(f"port: {ls.port}, pull_page: 10, project_prefix: restart"))
    try:
        _stage(ls, table, batch, monkeypatch)
        pushed = ls.ptf("annotate", "push", "--batch", batch)
        assert pushed.returncode == 0, pushed.stderr[-3000:]
        ids = _task_ids(ls)
        ann = Annotator(ls, "ann2@example.com")
        sft_rows = [r for r in table.to_pylist() if r["kind"] == "sft"][:60]
        created = {
            ann.annotate(ids[r["sample_id"]], [_choice("verdict", "response", "accept")]) for r in sft_rows
        }

        ledger = Ledger(ls.home / "annotation" / "ledger.sqlite")
        before = ledger.events().num_rows
        server = LabelStudioServer(ls.home, port=ls.port)
        client = LabelStudioClient(ls.url, ls.admin_token(), timeout=10)
        stopped: list[bool] = []

        def stop_after_first_labels(_: int) -> None:
            # pages come oldest first, so the labeled tasks come last: stop once some are in
            if not stopped and ledger.events().num_rows > before:
                stopped.append(server.down())

        settings = AnnotationConfig(project_prefix="restart", pull_page=10)
        with pytest.raises(AnnotationError, match="did not answer"):
            pull(client, ledger, settings, progress=stop_after_first_labels)
        assert stopped == [True]
        partial = ledger.events().num_rows - before
        assert 0 < partial < len(created)

        up = ls.ptf("annotate", "up")
        assert up.returncode == 0, up.stderr[-3000:]
        client = LabelStudioClient(ls.url, ls.admin_token())
        pull(client, ledger, settings)
        pull(client, ledger, settings)  # a rerun adds nothing
        events = [
            e
            for e in ledger.events().to_pylist()[before:]
            if e["project_id"] == client.find_project("restart", "sft")
        ]
        got = [e["annotation_id"] for e in events if e["event"] == "created"]
        assert sorted(got) == sorted(created)  # none lost, none twice
        again = ls.ptf("annotate", "push", "--batch", batch)
        assert "0 tasks created, 100 already" in again.stdout
    finally:
        (ls.root / "factory.yaml").write_text(ls_yaml(f"port: {ls.port}, pull_page: 10"))


def test_status_and_idempotent_up(label_studio: LabelStudio) -> None:
    status = label_studio.ptf("annotate", "status", "--json")
    assert status.returncode == 0
    data = json.loads(status.stdout)
    assert data["answering"] is True and data["url"] == label_studio.url
    up = label_studio.ptf("annotate", "up", "--json")
    assert json.loads(up.stdout)["pid"] == data["pid"]  # the same process: up is idempotent
    creds = Path(data["credentials_file"])
    assert creds.stat().st_mode & 0o777 == 0o600
    # the admin's password and token are not on any command line of the server's processes
    # (`ps` shows those to every user): they travel in the environment
    admin = json.loads(creds.read_text())["admin"]
    group = os.getpgid(data["pid"])
    lines = [
        (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        for proc in Path("/proc").iterdir()
        if proc.name.isdigit() and _in_group(proc, group)
    ]
    assert lines, "no process of the server's group found"
    assert not [line for line in lines if admin["password"] in line or admin["token"] in line]


def _in_group(proc: Path, group: int) -> bool:
    try:
        return os.getpgid(int(proc.name)) == group
    except (ProcessLookupError, PermissionError):
        return False


@pytest.mark.parametrize(("kind", "ref"), [("sft", "sft@latest"), ("dpo", "preference@latest")])
def test_train_on_what_the_pipeline_published(
    label_studio: LabelStudio, tiny_model: Path, kind: str, ref: str
) -> None:
    """`ptf train` on the versions the curation run published from the experts' labels above."""
    ls = label_studio
    output = ls.root / "trained" / kind
    trained = ls.ptf(
        "train",
        kind,
        "--dataset",
        ref,
        "--model",
        str(tiny_model),
        "--output",
        str(output),
        "--max-steps",
        "6",
        "--learning-rate",
        "5e-3",
        "--batch-size",
        "8",
        "--max-length",
        "128",
        "--json",
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    lineage = json.loads(trained.stdout)
    assert lineage["dataset"]["ref"].startswith(ref.split("@", maxsplit=1)[0] + "@v")
    assert lineage["metrics"]["train_loss_after"] < lineage["metrics"]["train_loss_before"]
    shown = ls.ptf("datasets", "show", lineage["dataset"]["ref"], "--json")
    runs = json.loads(shown.stdout)["training_runs"]
    assert [r["run_id"] for r in runs] == [lineage["run_id"]]


def test_review_queue_catches_up_when_label_studio_is_back(
    label_studio: LabelStudio, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptfactory.pipelines.sensors import human_labels_sensor
    from tests.integration.conftest import free_port

    ls = label_studio
    batch = "review-queued"
    table = _routed_rows(batch, tag="queued ").slice(0, 5)
    config = ls.root / "factory.yaml"
    config.write_text(ls_yaml(f"url: 'http://127.0.0.1:{free_port()}', project_prefix: queued"))
    try:
        _stage(ls, table, batch, monkeypatch)
        down = ls.ptf("annotate", "push", "--batch", batch)
        assert down.returncode == 1 and "did not answer" in down.stderr, down.stderr[-2000:]
        instance = dg.DagsterInstance.get()
        with dg.build_sensor_context(instance=instance, resources=factory_resources(str(config))) as context:
            skipped = human_labels_sensor(context)
        assert isinstance(skipped, dg.SkipReason) and "did not answer" in str(skipped.skip_message)

        config.write_text(ls_yaml(f"port: {ls.port}, project_prefix: queued"))  # it is back
        with dg.build_sensor_context(instance=instance, resources=factory_resources(str(config))) as context:
            human_labels_sensor(context)
        client = LabelStudioClient(ls.url, ls.admin_token())
        project = client.find_project("queued", "sft")
        assert project is not None
        # every row still awaiting review is pushed to the (new) queue, these five among them
        waiting = set(table.column("sample_id").to_pylist())
        assert waiting <= set(client.sample_ids(project))
        assert waiting <= Ledger(ls.home / "annotation" / "ledger.sqlite").pushed_ids(project)
    finally:
        config.write_text(ls_yaml(f"port: {ls.port}, pull_page: 10"))


def test_push_skips_and_names_a_batch_with_no_stored_output(
    label_studio: LabelStudio, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One batch whose outputs are missing from this home never blocks pushing the others."""
    ls = label_studio
    table = _routed_rows("push-ok", tag="skip-test ").slice(0, 4)
    _stage(ls, table, "push-ok", monkeypatch)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("batch", ["push-ghost"])  # known to the instance, no output here
    pushed = ls.ptf("annotate", "push", "--batch", "push-ghost", "--batch", "push-ok")
    assert pushed.returncode == 0, pushed.stderr[-3000:]
    assert "skipped batch push-ghost: no stored routed_samples" in pushed.stderr
    assert "4 tasks created" in pushed.stdout
    pushed_ids = set(_task_ids(ls))
    assert set(table.column("sample_id").to_pylist()) <= pushed_ids


def test_a_server_that_refuses_our_token_is_a_clear_error(
    label_studio: LabelStudio, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Label Studio whose database was made with other credentials (credentials.json lost or
    replaced, the database kept) answers 401 to our token for ever: `up` says so and names the
    fix, instead of waiting out its 15 minutes in silence."""
    for name in ("PTF_LS_USERNAME", "PTF_LS_PASSWORD", "PTF_LS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert label_studio.ptf("annotate", "up").returncode == 0
    home = tmp_path / ".ptf"  # the same running server, seen with credentials of its own
    (home / "annotation").mkdir(parents=True)
    shutil.copy(label_studio.home / "annotation" / "server.json", home / "annotation" / "server.json")
    server = LabelStudioServer(home, port=label_studio.port)
    said: list[str] = []
    with pytest.raises(AnnotationError, match="refuses the admin token") as raised:
        server.up(wait_s=300, refused_s=2, say=said.append)
    message = str(raised.value)
    assert str(server.credentials_file) in message and "ptf annotate down" in message
    assert server.credentials().token not in message  # the error names the file, not the secret
    assert LabelStudioServer(label_studio.home, port=label_studio.port).answers()  # untouched
