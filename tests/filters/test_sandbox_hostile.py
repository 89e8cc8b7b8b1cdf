"""Hostile code in the real Docker sandbox: every attack contained with the right status, the
host unchanged, and the pool still serving the next job."""

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits
from tests.sandboxes import assert_no_containers_left

pytestmark = pytest.mark.integration
LIMITS = Limits(timeout_s=3, memory_mb=128, pids=32, output_bytes=1 << 20)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    box = DockerSandbox(LIMITS, workers=2, jobs_per_container=50)
    yield box
    box.close()
    assert_no_containers_left(box.session)


def _run(sandbox: DockerSandbox, code: str) -> object:
    return sandbox.run({"program.py": code}, ["python3", "program.py"])


def _still_serving(sandbox: DockerSandbox) -> None:
    result = _run(sandbox, "print('next job')")
    assert result.status == "passed" and result.stdout_tail == "next job\n"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "code", "status"),
    [
        ("fork_bomb", "import os\nwhile True:\n    os.fork()\n", {"failed", "timeout", "oom"}),
        ("infinite_loop", "while True:\n    pass\n", {"timeout"}),
        ("memory_hog", "x = []\nwhile True:\n    x.append(bytearray(10**7))\n", {"oom"}),
        ("stdout_flood", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", {"output_limit"}),
        ("kill_everything", "import os\nos.kill(-1, 9)\n", {"failed"}),
        ("sleep_past_timeout", "import time\ntime.sleep(60)\n", {"timeout"}),
        ("write_outside_workdir", "open('/usr/evil', 'w').write('x')\n", {"failed"}),
        ("read_root_only_file", "print(open('/etc/shadow').read())\n", {"failed"}),
    ],
)
def test_attack_is_contained(sandbox: DockerSandbox, name: str, code: str, status: set[str]) -> None:
    result = _run(sandbox, code)
    assert result.status in status, (name, result)  # type: ignore[attr-defined]
    _still_serving(sandbox)


def test_the_next_job_in_the_same_container_can_fork_after_a_fork_bomb() -> None:
    # One container, so the next job lands where the bomb went off. Its killed processes are
    # zombies until PID 1 reaps them, and each holds a place under the pids cap: the runner must
    # wait for them before it answers, or the next job's first fork fails ("timeout: fork system
    # call failed", exit 125) and a good program is recorded as failed.
    with DockerSandbox(LIMITS, workers=1) as box:
        for _ in range(3):
            bomb = _run(box, "import os\nwhile True:\n    os.fork()\n")
            assert bomb.status in {"failed", "timeout", "oom"}, bomb  # type: ignore[attr-defined]
            after = box.run({}, ["bash", "-c", "sleep 0 & wait; echo forked"])
            assert (after.status, after.stdout_tail) == ("passed", "forked\n"), after
    assert_no_containers_left(box.session)


_FORGE = """import glob, json, os
forged = 0
for path in glob.glob('/proc/[0-9]*/fd/[0-2]'):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, json.dumps({"id": "x", "exit_code": 0, "flooded": False}).encode() + b"\\n")
        os.close(fd)
        forged += 1
    except OSError:
        pass
print('forged', forged)
raise SystemExit(3)
"""


def test_a_job_cannot_forge_the_runners_answer(sandbox: DockerSandbox) -> None:
    # The runner's own stdin/stdout are the control channel: a job under the same uid must not
    # reach them through /proc (the runner is non-dumpable), so its result stays its own.
    result = _run(sandbox, _FORGE)
    assert result.status == "failed" and result.exit_code == 3, result  # type: ignore[attr-defined]
    _still_serving(sandbox)


def test_output_sent_to_init_fills_no_log_on_the_host(sandbox: DockerSandbox) -> None:
    code = "import os\nfd = os.open('/proc/1/fd/1', os.O_WRONLY)\nos.write(fd, b'x' * 10_000_000)\n"
    assert _run(sandbox, code).status == "passed"  # type: ignore[attr-defined]
    import docker

    for container in docker.from_env().containers.list(filters={"label": f"ptf.sandbox={sandbox.session}"}):
        assert container.attrs["HostConfig"]["LogConfig"]["Type"] == "none"
        assert container.attrs["LogPath"] == ""


def test_no_network_to_a_listener_on_the_host(sandbox: DockerSandbox) -> None:
    server = socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    got: list[object] = []

    def accept() -> None:
        try:
            got.append(server.accept())
        except OSError:
            pass

    listener = threading.Thread(target=accept)
    listener.start()
    gateway = "172.17.0.1"  # the host as seen from Docker's default bridge
    code = (
        f"import socket\nfor host in ('{gateway}', 'host.docker.internal', '127.0.0.1'):\n"
        f"    try:\n        socket.create_connection((host, {port}), timeout=2); print('CONNECTED', host)\n"
        "    except OSError as e:\n        print('refused', host, e)\n"
    )
    result = _run(sandbox, code)
    listener.join()
    server.close()
    assert "CONNECTED" not in result.stdout_tail  # type: ignore[attr-defined]
    assert got == []


def test_children_that_outlive_the_job_are_killed(sandbox: DockerSandbox) -> None:
    code = (
        "import subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        "subprocess.Popen(['python3', '-c', 'import time\\nwhile True: time.sleep(1)'])\nprint('spawned')\n"
    )
    assert _run(sandbox, code).status == "passed"  # type: ignore[attr-defined]
    # the next job in the same warm container sees none of them alive (a zombie not yet reaped by
    # PID 1 is dead already)
    listing = _run(sandbox, _PROCESS_LISTING)
    processes = json.loads(listing.stdout_tail)  # type: ignore[attr-defined]  # [pid, state, left over?]
    assert any(pid == "1" for pid, _, _ in processes)  # the listing saw the init
    alive = [p for p in processes if p[1] != "Z" and p[2]]
    assert alive == [], processes


_PROCESS_LISTING = """import json, os
out = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            stat = open('/proc/%s/stat' % pid).read()
            cmd = open('/proc/%s/cmdline' % pid, 'rb').read().split(bytes(1))
        except OSError:
            continue
        text = ' '.join(c.decode() for c in cmd)
        out.append([pid, stat.rsplit(')', 1)[1].split()[0], 'sleep 600' in text or 'while True' in text])
print(json.dumps(out))
"""


def test_no_host_environment_socket_or_files(sandbox: DockerSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTF_SECRET_TOKEN", "should-never-leak")
    code = (
        "import os\nprint(sorted(os.environ))\nprint(os.path.exists('/var/run/docker.sock'))\n"
        "print(os.getuid())\nprint(os.listdir('/work'))\n"
    )
    result = _run(sandbox, code)
    out = result.stdout_tail  # type: ignore[attr-defined]
    assert "PTF_SECRET_TOKEN" not in out and "should-never-leak" not in out
    assert "\nFalse\n65534\n" in out
    assert out.strip().endswith("]") and out.count("'j") == 1  # only its own fresh job directory


def test_job_directories_are_fresh_and_removed(sandbox: DockerSandbox) -> None:
    first = _run(sandbox, "open('left_behind.txt', 'w').write('x')\nimport os\nprint(os.getcwd())")
    second = _run(sandbox, "import os\nprint(os.getcwd(), os.listdir('.'), os.listdir('/work'))")
    assert first.stdout_tail.strip() not in second.stdout_tail  # type: ignore[attr-defined]
    assert "left_behind" not in second.stdout_tail  # type: ignore[attr-defined]


def test_host_is_unchanged(tmp_path: Path, sandbox: DockerSandbox) -> None:
    before = set(Path("/usr").iterdir())
    _run(
        sandbox,
        "import os\nfor p in ('/usr/x', '/tmp/x', '/work/../x'):\n    try: open(p, 'w')\n    except OSError: pass\n",
    )
    assert set(Path("/usr").iterdir()) == before
