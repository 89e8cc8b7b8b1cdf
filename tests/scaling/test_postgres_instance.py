"""The Dagster instance on a real PostgreSQL server (``PTF_INSTANCE=postgres``): a code server, the
daemon and two webservers, all separate processes on one database. A factory run submitted
through one webserver waits in the run queue until the daemon launches it; its steps run in
processes of their own (the multiprocess executor); the label sensor ticks under the daemon; and
runs, materializations, partitions, ticks and the sensor's cursor are rows in PostgreSQL that
both webservers serve."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest
import yaml
from dagster._core.scheduler.instigation import TickStatus
from dagster._grpc.client import DagsterGrpcClient

from ptfactory.assets.annotation import curated_samples, human_labels
from ptfactory.assets.datasets import preference_dataset, sft_dataset
from ptfactory.assets.decontamination import decontaminated_samples
from ptfactory.assets.dedup import deduplicated_samples
from ptfactory.assets.execution import execution_validated
from ptfactory.assets.generation import candidate_instructions, candidate_responses
from ptfactory.assets.judging import judged_samples
from ptfactory.assets.scoring import difficulty_scored, routed_samples
from ptfactory.assets.seeds import seed_tasks
from ptfactory.errors import UserInputError
from ptfactory.pipelines.instance import instance_home
from ptfactory.pipelines.sensors import SENSOR_NAME
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.versions import DatasetStore
from tests.conftest import PTF, REPO
from tests.pipelines.test_multiprocess import SEEDS, _config, _stage
from tests.scaling.postgres import Postgres, free_port, postgres_server

pytestmark = pytest.mark.integration
__all__ = ["postgres_server"]  # the fixture, used by name below

# every asset up to publish (its own list: tests/pipelines/test_definitions.py splits it at review)
GRAPH = [seed_tasks, candidate_instructions, candidate_responses, deduplicated_samples]
GRAPH += [decontaminated_samples, execution_validated]
GRAPH += [difficulty_scored, judged_samples, routed_samples, human_labels, curated_samples]
GRAPH += [sft_dataset, preference_dataset]
MP_JOB = "mp_factory"
LOCATION = "pg"
REPOSITORY = "__repository__"
SENSOR = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": SENSOR_NAME}


@dg.definitions
def pg_defs() -> dg.Definitions:
    """The project's definitions plus the graph up to publish as a multiprocess job: the code
    location the code server serves (``-a pg_defs``)."""
    from ptfactory.pipelines.definitions import defs

    job = dg.define_asset_job(
        MP_JOB,
        selection=dg.AssetSelection.assets(*GRAPH),
        # forkserver: each step forks from a process that imported the definitions once, instead of
        # paying the imports again per step (a spawned step costs ~6 s of `import dagster` alone)
        executor_def=dg.multiprocess_executor.configured(
            {
                "max_concurrent": 2,
                "start_method": {
                    "forkserver": {
                        "preload_modules": [
                            "ptfactory.pipelines.definitions",
                            "tests.scaling.test_postgres_instance",
                            "ptfactory.engines.transformers_engine",  # torch, transformers
                        ]
                    }
                },
            }
        ),
    )
    return dg.Definitions(
        assets=defs.assets,
        resources=defs.resources,
        jobs=[*(defs.jobs or []), job],
        sensors=defs.sensors,
        schedules=defs.schedules,
    )


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set for the block (what the real processes are given), then as it was."""
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@dataclass
class Deployment:
    pg: Postgres
    root: Path
    home: Path
    dagster_home: Path
    env: dict[str, str]
    webservers: list[int]
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def instance(self) -> dg.DagsterInstance:
        with _environ(self.env):  # the yaml names PTF_PG_PASSWORD
            return dg.DagsterInstance.from_config(str(self.dagster_home))

    def graphql(self, port: int, query: str, **variables: Any) -> dict[str, Any]:
        response = httpx.post(
            f"http://127.0.0.1:{port}/graphql", json={"query": query, "variables": variables}, timeout=60
        )
        response.raise_for_status()
        body = response.json()
        assert "errors" not in body, body
        data: dict[str, Any] = body["data"]
        return data

    def tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(self.logs.glob("*.log"))
        )


def _start(dep: Deployment, name: str, cmd: list[str]) -> None:
    log = (dep.logs / f"{name}.log").open("wb")
    dep.procs[name] = subprocess.Popen(
        cmd, cwd=REPO, env=dep.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    try:  # what it started (the run worker, the forkserver), by its session id: ours
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(what: str, dep: Deployment, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in dep.procs.items():
            assert proc.poll() is None, f"{name} exited ({proc.returncode}) waiting for {what}\n{dep.tail()}"
        try:
            if check():
                return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{dep.tail()}")


@pytest.fixture(scope="module")
def deployment(
    postgres_server: Postgres, tmp_path_factory: pytest.TempPathFactory, tiny_model: Path
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("pg-project")
    shutil.copy(REPO / "dagster.yaml", root / "dagster.yaml")  # the project's queue and pools
    config = _config(root, tiny_model)
    with config.open("a") as fh:  # the sensor's shortest interval: several ticks during the run
        fh.write(f"annotation: {{curation_interval_s: 5, port: {free_port()}}}\n")  # no stray server
    home = root / ".ptf"
    _stage(home, root)
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env.update(postgres_server.env(), PTF_HOME=str(home), PTF_CONFIG=str(config))
    with _environ(env):
        dagster_home = instance_home(root)
    env["DAGSTER_HOME"] = str(dagster_home)
    logs = root / "logs"
    logs.mkdir()
    dep = Deployment(postgres_server, root, home, dagster_home, env, [free_port(), free_port()], logs)
    with dep.instance() as instance:
        instance.add_dynamic_partitions("batch", list(SEEDS))
    grpc = free_port()
    workspace = root / "workspace.yaml"
    workspace.write_text(
        yaml.safe_dump(
            {"load_from": [{"grpc_server": {"host": "127.0.0.1", "port": grpc, "location_name": LOCATION}}]}
        )
    )
    bin_dir = Path(sys.executable).parent
    try:
        _start(
            dep,
            "code-server",
            [
                *(str(bin_dir / "dagster"), "api", "grpc", "-h", "127.0.0.1", "-p", str(grpc)),
                *("-m", "tests.scaling.test_postgres_instance", "-a", "pg_defs", "-d", str(REPO)),
            ],
        )
        # the webservers import while the code server loads; they reload the workspace once it answers
        for i, port in enumerate(dep.webservers):
            _start(
                dep,
                f"webserver-{i}",
                [
                    str(bin_dir / "dagster-webserver"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-w",
                    str(workspace),
                ],
            )
        client = DagsterGrpcClient(port=grpc, host="127.0.0.1")
        _wait("the code server", dep, lambda: client.health_check_query() == "SERVING", 240)
        # the daemon loads the workspace once (then every 60 s): only once the code server answers
        _start(dep, "daemon", [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)])
        for port in dep.webservers:
            _wait(
                f"the webserver on {port}",
                dep,
                lambda port=port: httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).is_success,  # type: ignore[misc]
                240,
            )
            reloaded = dep.graphql(port, "mutation { reloadWorkspace { __typename } }")
            assert reloaded["reloadWorkspace"]["__typename"] == "Workspace", reloaded
        yield dep
    finally:
        for proc in dep.procs.values():  # all at once: the daemon takes seconds to wind down
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in reversed(dep.procs.values()):
            _stop(proc)


_LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""
_RUNS = "{ runsOrError { __typename ... on Runs { results { runId status } } } }"
_SENSOR_FIELDS = "sensorState { status typeSpecificData { ... on SensorData { lastCursor } } }"
_SENSOR = (
    "query Sensor($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { __typename ... on Sensor { "
    + _SENSOR_FIELDS
    + " } } }"
)
_STOP = (
    "mutation Stop($o: String, $i: String) { stopSensor(jobOriginId: $o, jobSelectorId: $i) { __typename "
    "... on StopSensorMutationResult { instigationState { status } } } }"
)
_CURSOR = (
    "mutation Cursor($s: SensorSelector!, $c: String) { setSensorCursor(sensorSelector: $s, cursor: $c) "
    "{ __typename ... on Sensor { " + _SENSOR_FIELDS + " } ... on PythonError { message } } }"
)


def _run_ids(dep: Deployment, port: int) -> dict[str, str]:
    runs = dep.graphql(port, _RUNS)["runsOrError"]
    assert runs["__typename"] == "Runs", runs
    return {r["runId"]: r["status"] for r in runs["results"]}


def test_factory_run_queued_launched_by_daemon_multiprocess_in_postgres(deployment: Deployment) -> None:
    dep = deployment
    first, second = dep.webservers
    params = {
        "selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": MP_JOB},
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "b1"}]},
    }
    launched = dep.graphql(first, _LAUNCH, params=params)["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    assert launched["run"]["status"] == "QUEUED"  # the webserver only queued it: the daemon launches
    with dep.instance() as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        done = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}

        def finished() -> bool:
            run = instance.get_run_by_id(run_id)
            return run is not None and run.status in done

        _wait("the factory run", dep, finished, 420)
        run = instance.get_run_by_id(run_id)
        assert run is not None
        assert run.status == dg.DagsterRunStatus.SUCCESS, dep.tail()
        records = instance.all_logs(run_id)
        events = [e.dagster_event for e in records if e.dagster_event]
        _print_timeline(records)
        step_pids = {e.pid for e in events if e.event_type == dg.DagsterEventType.STEP_START}
        run_pid = next(e.pid for e in events if e.event_type == dg.DagsterEventType.RUN_START)
    # each step in a process of its own, none in the run worker's
    assert len(step_pids) >= 2 and run_pid not in step_pids, (step_pids, run_pid)

    # the rows are in PostgreSQL: the run, its trail through the queue, its materializations
    pg = dep.pg
    assert pg.query("SELECT status FROM runs WHERE run_id = %s", (run_id,)) == [("SUCCESS",)]
    kinds = {k for (k,) in pg.query("SELECT dagster_event_type FROM event_logs WHERE run_id = %s", (run_id,))}
    # queued by the webserver, started by the daemon's dequeue (STARTING is the launcher's event)
    assert {"PIPELINE_ENQUEUED", "PIPELINE_STARTING", "PIPELINE_START", "PIPELINE_SUCCESS"} <= kinds, kinds
    materialized = pg.query(
        "SELECT DISTINCT asset_key, partition FROM event_logs "
        "WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION'",
        (run_id,),
    )
    # every asset of the graph; the batch's partition of the partitioned ones
    assert {(json.loads(key)[0], part) for key, part in materialized} == {
        (a.key.to_user_string(), "b1" if a.partitions_def else None) for a in GRAPH
    }
    partitions = pg.query("SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'batch'")
    assert sorted(p for (p,) in partitions) == sorted(SEEDS)
    # and the run published into the home
    manifest = DatasetStore(str(dep.home)).resolve("sft@latest")
    assert (manifest.version, manifest.batches) == (1, ["b1"])
    assert AssetStore(str(dep.home)).read("deduplicated_samples", "b1").num_rows >= len(SEEDS["b1"])

    # both webservers read the same instance: the same runs, the same status
    assert _run_ids(dep, first) == _run_ids(dep, second) == {run_id: "SUCCESS"}


def test_label_sensor_ticks_and_cursor_in_postgres(deployment: Deployment) -> None:
    dep = deployment
    first, second = dep.webservers
    pg = dep.pg

    def ticks() -> list[tuple[str, str]]:
        rows = pg.query("SELECT status, tick_body FROM job_ticks WHERE type = 'SENSOR'")
        return [(s, b) for s, b in rows if SENSOR_NAME in b]

    # curation_interval_s is 5: the daemon evaluates it every 5 s
    _wait("two label-sensor ticks", dep, lambda: [s for s, _ in ticks()].count("SKIPPED") >= 2, 120)
    # no Label Studio in this project: each finished tick skips, saying why (one may be under way)
    statuses = {s for s, _ in ticks()}
    assert statuses <= {"SKIPPED", "STARTED"}, ticks()
    with dep.instance() as instance:
        origin_id, selector_id = _sensor_ids(instance)
        sensor_ticks = [
            t for t in instance.get_ticks(origin_id, selector_id) if t.status == TickStatus.SKIPPED
        ]
    assert len(sensor_ticks) >= 2 and all(t.skip_reason for t in sensor_ticks)

    # stop it and let a tick under way finish (it writes back the state it read: its status, its
    # cursor); then set a cursor through one webserver: the other webserver and the table see it
    stopped = dep.graphql(first, _STOP, o=origin_id, i=selector_id)["stopSensor"]
    assert stopped["instigationState"]["status"] == "STOPPED", stopped

    def settled() -> bool:
        if "STARTED" in {s for s, _ in ticks()}:
            return False
        if dep.graphql(second, _SENSOR, s=SENSOR)["sensorOrError"]["sensorState"]["status"] != "STOPPED":
            dep.graphql(first, _STOP, o=origin_id, i=selector_id)  # a finishing tick wrote RUNNING back
            return False
        return True

    _wait("the stopped sensor to settle", dep, settled, 60)
    set_ = dep.graphql(first, _CURSOR, s=SENSOR, c="42")["setSensorCursor"]
    assert set_["__typename"] == "Sensor", set_
    seen = dep.graphql(second, _SENSOR, s=SENSOR)["sensorOrError"]["sensorState"]
    assert seen == {"status": "STOPPED", "typeSpecificData": {"lastCursor": "42"}}
    bodies = [b for (b,) in pg.query("SELECT instigator_body FROM instigators") if SENSOR_NAME in b]
    assert len(bodies) == 1 and json.loads(bodies[0])["job_specific_data"]["cursor"] == "42"


def _print_timeline(records: list[Any]) -> None:
    """When each step started and ended, relative to the run's enqueueing (shown with ``-s``)."""
    start = records[0].timestamp
    shown = {"STEP_START", "STEP_SUCCESS", "STEP_FAILURE"}
    for record in records:
        event = record.dagster_event
        if event and (event.event_type_value in shown or event.event_type_value.startswith("PIPELINE_")):
            print(f"{record.timestamp - start:7.1f} s  {event.event_type_value:18} {event.step_key or ''}")


def _sensor_ids(instance: dg.DagsterInstance) -> tuple[str, str]:
    state = next(s for s in instance.all_instigator_state() if s.name == SENSOR_NAME)
    return state.instigator_origin_id, state.selector_id


def test_postgres_yaml_names_the_password_env_not_the_password(
    postgres_server: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in postgres_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PTF_HOME", str(tmp_path / "home"))
    base = instance_home(tmp_path)
    text = (base / "dagster.yaml").read_text()
    assert postgres_server.password not in text
    db = yaml.safe_load(text)["storage"]["postgres"]["postgres_db"]
    assert db == {
        "username": "ptf",
        "hostname": "127.0.0.1",
        "port": postgres_server.port,
        "db_name": "dagster",
        "scheme": "postgresql+psycopg2",
        "password": {"env": "PTF_PG_PASSWORD"},
    }
    monkeypatch.setenv("PTF_PG_URL", f"postgresql://ptf:{postgres_server.password}@127.0.0.1/dagster")
    with pytest.raises(UserInputError, match="PTF_PG_PASSWORD") as caught:
        instance_home(tmp_path)
    assert postgres_server.password not in str(caught.value)
    monkeypatch.setenv("PTF_INSTANCE", "mysql")
    with pytest.raises(UserInputError, match="'mysql' is not an instance kind"):
        instance_home(tmp_path)


def test_unanswering_server_is_one_clear_error(tmp_path: Path) -> None:
    """`ptf` with PTF_INSTANCE=postgres and nothing on that port: one line naming the URL (no
    password) and the fix, exit 2, no traceback."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "factory.yaml").write_text("{}\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PTF_HOME", "DAGSTER_HOME")}
    env.update(
        PTF_INSTANCE="postgres",
        PTF_PG_URL=f"postgresql://ptf@127.0.0.1:{port}/dagster",
        PTF_PG_PASSWORD="s3cret-not-shown",
        COLUMNS="300",
        NO_COLOR="1",
    )
    done = subprocess.run(
        [*PTF, "datasets", "list"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"PostgreSQL at postgresql://ptf@127.0.0.1:{port}/dagster does not answer" in done.stderr
    assert "unset PTF_INSTANCE" in done.stderr and "s3cret" not in done.stderr
    assert "Traceback" not in done.stderr
