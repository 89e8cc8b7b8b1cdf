"""Agent episodes in the real Docker sandbox: state kept across steps, the same isolation as code
validation, and hostile steps contained, recorded as failed steps, with the pool still serving
other episodes."""

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ptfactory.errors import SandboxError
from ptfactory.filters.execution.bwrap_sandbox import BwrapSandbox, bwrap_available
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.episode import EpisodePool
from ptfactory.filters.execution.limits import Limits
from tests.sandboxes import assert_no_containers_left

pytestmark = pytest.mark.integration
LIMITS = Limits(timeout_s=4, memory_mb=128, pids=32, output_bytes=1 << 20, workdir_mb=32)


@pytest.fixture(scope="module")
def pool() -> Iterator[EpisodePool]:
    box = DockerSandbox(LIMITS, workers=2)
    episodes = EpisodePool(box)
    yield episodes
    episodes.close()
    assert_no_containers_left(box.session)


def _serves(pool: EpisodePool) -> None:
    with pool.open({"x.txt": "still here\n"}) as other:
        result = other.bash("cat x.txt")
        assert (result.status, result.output) == ("passed", "still here\n")


def test_state_persists_across_steps_and_hashes_track_it(pool: EpisodePool) -> None:
    with pool.open({"a.txt": "one\n", "sub/b.txt": "two\n"}) as episode:
        start = episode.initial_hash
        assert start is not None and len(start) == 64
        assert episode.bash("cat a.txt sub/b.txt").output == "one\ntwo\n"
        wrote = episode.write_file("sub/c.txt", "three\n")
        assert wrote.status == "passed" and wrote.tree_hash not in (None, start)
        listed = episode.bash("ls -R && whoami 2>&1; id -u")
        assert "c.txt" in listed.output and "65534" in listed.output
        assert episode.read_file("sub/c.txt").output == "three\n"
        assert episode.bash("rm sub/c.txt").tree_hash == start  # back to the start: the same hash
        # per-call timeout and output cap
        assert episode.bash("sleep 30").status == "timeout"
        assert episode.bash("yes | head -c 3000000").status == "output_limit"
        assert episode.bash("cat a.txt").output == "one\n"  # the workspace survived both


def test_isolation(pool: EpisodePool) -> None:
    with pool.open({"a.txt": "x"}) as episode:
        socket = episode.bash(
            "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)\""
        )
        assert socket.status == "failed" and "unreachable" in socket.output.lower()
        assert episode.bash("echo x > /usr/evil").status == "failed"  # read-only root
        assert episode.bash("cat /etc/shadow").status == "failed"
        caps = episode.bash("grep CapEff /proc/self/status")
        assert caps.output.split()[-1] == "0000000000000000"


@pytest.mark.parametrize(
    ("name", "script", "statuses"),
    [
        ("fork_bomb", "python3 -c 'import os\nwhile True: os.fork()'", {"failed", "timeout", "oom"}),
        ("shell_fork_bomb", "f(){ f | f & }; f", {"failed", "timeout", "passed", "oom"}),
        ("disk_fill", "dd if=/dev/zero of=big bs=1M count=500", {"failed"}),
        ("memory_hog", "python3 -c 'x = []\nwhile True: x.append(bytearray(10**7))'", {"oom", "failed"}),
        ("kill_pid_1", "kill -9 1; sleep 0.2; echo alive", {"passed", "failed"}),
        (
            "socket_out",
            "python3 -c \"import socket; socket.socket(2, 2).sendto(b'x', ('8.8.8.8', 53))\"",
            {"failed"},
        ),
    ],
)
def test_hostile_step_is_contained(pool: EpisodePool, name: str, script: str, statuses: set[str]) -> None:
    with pool.open({"keep.txt": "k\n"}) as episode:
        result = episode.bash(script)
        assert result.status in statuses, (name, result)
        if episode.alive:  # the episode goes on: its workspace is intact
            after = episode.bash("cat keep.txt; rm -f big")
            assert after.status == "passed" and after.output.startswith("k\n"), (name, after)


def test_killing_every_process_ends_only_that_episode(pool: EpisodePool) -> None:
    with pool.open({"a": "1"}) as doomed, pool.open({"b": "2"}) as bystander:
        result = doomed.bash("kill -9 -1")
        assert result.status == "failed" and result.tree_hash is None
        assert not doomed.alive
        assert doomed.bash("echo again").status == "sandbox_error"
        assert bystander.bash("cat b").output == "2"
    _serves(pool)


def test_workspace_escape_attempts(pool: EpisodePool, tmp_path: Path) -> None:
    probe = Path("/ptf-escape-probe")
    with pool.open({"a.txt": "x"}) as episode:
        assert episode.read_file("../../etc/passwd").status == "failed"
        assert episode.write_file("/etc/evil", "x").status == "failed"
        assert "leaves the workspace" in episode.write_file("../x", "x").detail
        assert episode.bash(f"touch {probe}").status == "failed"
        # a link to a system file: writing through the tool replaces the link, not the target
        episode.bash("ln -s /etc/passwd p")
        assert episode.write_file("p", "mine\n").status == "passed"
        assert episode.bash("cat p; test -L p || echo not-a-link; grep -c root /etc/passwd").output == (
            "mine\nnot-a-link\n1\n"
        )
        refused = episode.bash("curl http://example.com")
        assert refused.status == "policy_violation" and refused.exit_code is None
    assert not probe.exists()


def test_many_hostile_episodes_in_parallel_and_the_pool_still_serves(pool: EpisodePool) -> None:
    scripts = [
        "kill -9 -1",
        "python3 -c 'import os\nwhile True: os.fork()'",
        "dd if=/dev/zero of=f bs=1M count=99",
        "echo ok",
    ]

    def episode(script: str) -> str:
        with pool.open({"a": "1"}) as ep:
            return ep.bash(script).status

    with ThreadPoolExecutor(4) as threads:
        statuses = list(threads.map(episode, scripts))
    assert statuses[-1] == "passed" and all(s != "sandbox_error" for s in statuses), statuses
    _serves(pool)


def test_bwrap_backend_refuses_episodes_with_a_clear_message() -> None:
    # scripts/setup-system.sh installs bubblewrap: a machine without it fails here, never skips
    assert bwrap_available() is None, bwrap_available()
    with pytest.raises(SandboxError, match=r"agent episodes need the Docker sandbox.*bubblewrap"):
        EpisodePool(BwrapSandbox(LIMITS, 1))
