"""The bubblewrap fallback, for real: chosen (loudly) only when no Docker engine answers."""

import json

import pytest

from ptfactory.filters.execution.bwrap_sandbox import BwrapSandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.select import WARNING, backend_status, open_sandbox

LIMITS = Limits(timeout_s=3, memory_mb=256, pids=64, output_bytes=1 << 20)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("print('ok')", "passed"),
        ("raise SystemExit(4)", "failed"),
        ("while True:\n    pass", "timeout"),
        ("x = []\nwhile True:\n    x.append(bytearray(10**7))", "oom"),
        ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", "output_limit"),
        ("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)", "failed"),
        ("open('/usr/evil', 'w')", "failed"),
        ("print(open('/etc/passwd').read())", "failed"),
    ],
)
def test_bwrap_contains(code: str, status: str) -> None:
    result = BwrapSandbox(LIMITS).run({"program.py": code}, ["python3", "program.py"])
    assert result.status == status, result


def test_bwrap_sees_no_host_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTF_SECRET_TOKEN", "should-never-leak")
    result = BwrapSandbox(LIMITS).run(
        {"p.py": "import os; print(sorted(os.environ), os.getuid())"}, ["python3", "p.py"]
    )
    assert "PTF_SECRET_TOKEN" not in result.stdout_tail
    assert result.stdout_tail.strip().endswith("65534")


def test_no_engine_means_bwrap_with_a_loud_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], ptf
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    status = backend_status()
    assert status.backend == "bwrap"
    with open_sandbox(LIMITS) as sandbox:
        assert sandbox.backend == "bwrap"
    assert WARNING in capsys.readouterr().err
    doctor = json.loads(
        ptf("doctor", "--json", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"}).stdout
    )
    sandbox_row = next(c for c in doctor if c["component"] == "sandbox backend")
    assert sandbox_row["status"] == "warn" and sandbox_row["detail"].startswith("bwrap")
    with pytest.raises(Exception, match="no Docker engine answers"):
        open_sandbox(LIMITS, backend="docker")
