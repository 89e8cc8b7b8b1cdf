"""The bubblewrap sandbox, for real: run only where `sandbox.backend: bwrap` chose it (loudly)."""

import json

import pytest

from ptfactory.errors import SandboxError
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


def test_no_engine_is_an_error_saying_how_to_start_docker_or_opt_into_bwrap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], ptf, project
) -> None:  # type: ignore[no-untyped-def]
    """`auto` never falls to the weaker sandbox: Docker, or an error that says how to start it and
    how to opt into bubblewrap; bubblewrap runs only where chosen, loudly; `ptf doctor` says which
    one runs with the project's setting (issue 39 item 7)."""

    def doctor(env: dict[str, str] | None = None) -> dict[str, str]:
        rows = json.loads(ptf("doctor", "--json", env=env).stdout)
        row: dict[str, str] = next(c for c in rows if c["component"] == "sandbox backend")
        return row

    assert doctor()["detail"].startswith("docker: code runs in docker; sandbox.backend: auto")
    no_engine = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    monkeypatch.setenv("DOCKER_HOST", no_engine["DOCKER_HOST"])
    for backend in ("auto", "docker"):
        assert backend_status(backend).backend is None
        with pytest.raises(SandboxError) as refused:
            open_sandbox(LIMITS, backend=backend)
        message = str(refused.value)
        assert "no Docker engine answers" in message and "systemctl start docker" in message
        assert "`sandbox: {backend: bwrap}`" in message
    assert backend_status("bwrap").backend == "bwrap"
    with open_sandbox(LIMITS, backend="bwrap") as sandbox:
        assert sandbox.backend == "bwrap"
    assert WARNING in capsys.readouterr().err
    missing = doctor(no_engine)
    assert missing["status"] == "missing" and missing["detail"].startswith("none: no sandbox can run code")
    assert "sandbox.backend: auto needs Docker" in missing["detail"] and "backend: bwrap" in missing["detail"]
    config = project / "factory.yaml"
    config.write_text(config.read_text() + "sandbox: {backend: bwrap}\n")
    opted = doctor(no_engine)
    assert opted["status"] == "warn" and opted["detail"].startswith("bwrap: code runs in bwrap")
    assert "opted in" in opted["detail"]
