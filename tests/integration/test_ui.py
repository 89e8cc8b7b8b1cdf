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

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _graphql(port: int, query: str) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
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


def test_ui_serves_the_asset_graph_and_stops_on_sigterm(project: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PTF_HOME", "DAGSTER_HOME")}
    env["PTF_TEST_MARK"] = f"ptf-ui-port={port}"  # inherited by every child: lets us find stragglers
    process = subprocess.Popen(
        [sys.executable, "-m", "pipelines", "ui", "--port", str(port)],
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
