"""OOM kills in the real Docker sandbox, as the engine reports them (issue 39 item 7).

The sandbox asks the Docker engine (its ``oom`` events, ``State.OOMKilled``) instead of reading a
cgroup-v1 file. This machine's dockerd runs on cgroup v1 (``docker info``: CgroupVersion 1,
cgroupfs), where the old file reader worked; to show the status does not depend on it, the pool
runs in a mount namespace whose ``/sys/fs/cgroup`` is empty, as the v1 memory hierarchy is absent on
a cgroup-v2 host. There the old reader reported a memory hog ``failed``; the engine still says
``oom``. A job that SIGKILLs itself is no OOM kill.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ptfactory.filters.execution.limits import SandboxConfig
from ptfactory.filters.execution.select import open_sandbox
from tests.conftest import REPO
from tests.sandboxes import assert_no_containers_left

pytestmark = pytest.mark.integration

_POOL = """
import json, os
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits

cases = {
    "memory_hog": "x = []\\nwhile True:\\n    x.append(bytearray(10**7))\\n",
    "next_job": "print('ok')",
    "kills_itself": "import os, signal\\nos.kill(os.getpid(), signal.SIGKILL)\\n",
    "hog_again": "x = bytearray(10**9)\\n",
}
found = {"cgroup_v1_memory_visible": os.path.isdir("/sys/fs/cgroup/memory")}
with DockerSandbox(Limits(timeout_s=10, memory_mb=96, pids=32), workers=1) as box:
    for name, code in cases.items():
        found[name] = box.run({"p.py": code}, ["python3", "p.py"]).status
    found["session"] = box.session
print(json.dumps(found))
"""


def test_a_memory_hog_is_reported_oom_without_the_cgroup_v1_files() -> None:
    hidden = 'mount -t tmpfs ptf-no-cgroup-v1 /sys/fs/cgroup && exec "$0" "$@"'
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", hidden, sys.executable, "-c", _POOL],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["cgroup_v1_memory_visible"] is False  # the premise: no v1 file to read
    assert {k: found[k] for k in ("memory_hog", "next_job", "kills_itself", "hog_again")} == {
        "memory_hog": "oom",
        "next_job": "passed",
        "kills_itself": "failed",
        "hog_again": "oom",
    }
    assert_no_containers_left(found["session"])


def test_open_sandbox_recycles_containers_after_the_configured_jobs() -> None:
    settings = SandboxConfig(jobs_per_container=2, timeout_s=10)
    with open_sandbox(settings, 1, settings.backend) as sandbox:
        assert sandbox.backend == "docker" and sandbox.jobs_per_container == 2  # type: ignore[attr-defined]
        hosts = [sandbox.run({}, ["hostname"]).stdout_tail.strip() for _ in range(3)]
    # each container's hostname is its id: two jobs in the first, the third in a fresh one
    assert hosts[0] == hosts[1] != hosts[2], hosts
    assert_no_containers_left(sandbox.session)  # type: ignore[attr-defined]
