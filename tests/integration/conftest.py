"""A real Label Studio for the session, started the way a user starts it: `ptf annotate up`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PTF, REPO

# Debian's chromium, headless, as root, on a closed network (RESOURCES.md): no background traffic
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = REPO / ".ptf" / "test-artifacts"  # screenshots the browser tests keep


def launch_chromium(playwright: Any) -> Any:
    return playwright.chromium.launch(
        executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=CHROMIUM_ARGS
    )


# every row the tests stage needs a human, so each goes to review (and none is audited)
ROUTE_ALL = "review_budget: 1000, audit_rate: 0"


def ls_yaml(annotation: str, routing: str = ROUTE_ALL) -> str:
    """The test project's factory.yaml: its ``annotation`` and ``routing`` sections."""
    return f"annotation: {{{annotation}}}\nrouting: {{{routing}}}\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LabelStudio:
    root: Path  # a project folder: dagster.yaml, factory.yaml, .ptf/
    port: int
    env: dict[str, str]
    annotators: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def home(self) -> Path:
        return self.root / ".ptf"

    def ptf(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*PTF, *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def admin_token(self) -> str:
        data = json.loads((self.home / "annotation" / "credentials.json").read_text())
        return str(data["admin"]["token"])


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudio]:
    root = tmp_path_factory.mktemp("ls-project")
    shutil.copy(REPO / "dagster.yaml", root / "dagster.yaml")
    port = free_port()
    (root / "factory.yaml").write_text(ls_yaml(f"port: {port}, pull_page: 10"))
    env = {k: v for k, v in os.environ.items() if k not in ("PTF_HOME", "DAGSTER_HOME")}
    env.update(
        COLUMNS="200",
        NO_COLOR="1",
        PTF_LS_VENV=os.environ.get("PTF_LS_VENV", str(REPO / ".ptf" / "venvs" / "labelstudio")),
    )
    server = LabelStudio(root, port, env)
    # the way make demo's set-up does it: migrate first (once), then a warm start
    migrated = server.ptf("annotate", "migrate")
    assert migrated.returncode == 0 and "is migrated" in migrated.stdout, migrated.stderr[-3000:]
    again = server.ptf("annotate", "migrate")
    assert again.returncode == 0 and "already migrated" in again.stdout, again.stderr[-3000:]
    up = server.ptf("annotate", "up", "--json")
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        assert json.loads(up.stdout)["answering"] is True
        for name in ("ann1@example.com", "ann2@example.com"):
            added = server.ptf("annotate", "adduser", name)
            assert added.returncode == 0, added.stderr[-2000:]
        creds = json.loads((server.home / "annotation" / "credentials.json").read_text())
        server.annotators = creds["annotators"]
        yield server
    finally:
        server.ptf("annotate", "down", timeout=120)
