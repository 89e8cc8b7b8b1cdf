"""`ptf ui` serves the real Dagster UI on loopback and stops, whole, on one SIGTERM."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.integration.conftest import ARTIFACTS, launch_chromium

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _graphql(port: int, query: str, variables: dict[str, object] | None = None) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _dagster_processes(port: int) -> list[int]:
    """Processes of the `dagster dev` serving ``port`` (webserver, daemon, code server are its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if "dagster" in cmdline and (str(port) in cmdline or f"ptf-ui-port={port}".encode() in environ):
            found.append(int(entry.name))
    return found


def _launch_and_wait(port: int) -> None:
    """A materialization launched over GraphQL, as the UI's button does, runs to success."""
    assert _graphql(port, "mutation { setNuxSeen }")["data"] == {"setNuxSeen": True}
    repo = _graphql(
        port, "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }"
    )
    node = repo["data"]["repositoriesOrError"]["nodes"][0]  # type: ignore[index]
    params = {
        "selector": {
            "repositoryLocationName": node["location"]["name"],
            "repositoryName": node["name"],
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": ["human_labels"]}],
        },
        "runConfigData": {},
        "mode": "default",
    }
    launched = _graphql(
        port,
        "mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename"
        " ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }",
        {"p": params},
    )["data"]["launchRun"]  # type: ignore[index]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    status = ""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        body = _graphql(
            port, "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id}
        )
        status = body["data"]["runOrError"]["status"]  # type: ignore[index]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(1)
    assert status == "SUCCESS"


def _drawn(name: str, labels: list[str]) -> bool:
    """The graph middle-truncates long names when zoomed out: ``cand…_instructions``."""
    for label in labels:
        head, _, tail = label.strip().partition("…")
        if label.strip() == name or (tail and name.startswith(head) and name.endswith(tail)):
            return True
    return False


def _asset_graph_in_chromium(port: int, assets: list[str]) -> None:
    """Headless Chromium draws every stage's asset in the lineage graph (screenshot kept)."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    labels: list[str] = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 2400, "height": 1400})
            # routed_samples' neighbours reach every stage but human_labels, whose own view adds it,
            # and failure_seeds (it reads an evaluation report, no asset): its own view draws it
            for start in ("routed_samples", "human_labels", "failure_seeds"):
                page.goto(
                    f"http://127.0.0.1:{port}/assets/{start}?view=lineage&lineageScope=neighbors&lineageDepth=20"
                )
                names = page.locator("[class*='AssetNode_assetName']")
                names.first.wait_for(timeout=120_000)
                page.wait_for_timeout(2000)  # the layout settles
                labels += names.all_inner_texts()
                page.screenshot(path=str(ARTIFACTS / f"dagster-lineage-{start}.png"))
        finally:
            browser.close()
    missing = [a for a in assets if not _drawn(a, labels)]
    assert missing == [], (missing, labels)


def test_ui_serves_the_asset_graph_and_stops_on_sigterm(project: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PTF_HOME", "DAGSTER_HOME")}
    env["PTF_TEST_MARK"] = f"ptf-ui-port={port}"  # inherited by every child: lets us find stragglers
    process = subprocess.Popen(
        [sys.executable, "-m", "ptfactory", "ui", "--port", str(port)],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        body: dict[str, object] = {}
        while time.monotonic() < deadline:
            assert process.poll() is None, "ptf ui exited early"
            try:
                body = _graphql(port, "{ assetNodes { assetKey { path } groupName } }")
                if body.get("data", {}).get("assetNodes"):  # type: ignore[union-attr]
                    break
            except OSError:
                pass
            time.sleep(0.5)
        nodes = body["data"]["assetNodes"]  # type: ignore[index]
        keys = {n["assetKey"]["path"][0]: n["groupName"] for n in nodes}  # type: ignore[index]
        assert keys["seed_tasks"] == "seed" and keys["sft_dataset"] == "publish"
        _launch_and_wait(port)
        _asset_graph_in_chromium(port, sorted(keys))
        with socket.socket() as sock:  # loopback only by default
            assert sock.connect_ex(("127.0.0.1", port)) == 0

        os.kill(process.pid, signal.SIGTERM)  # one signal, to the ptf process only
        assert process.wait(timeout=60) is not None
        deadline = time.monotonic() + 30
        while _dagster_processes(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _dagster_processes(port), "dagster dev left processes behind"
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0
    finally:
        for pid in [process.pid, *_dagster_processes(port)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
