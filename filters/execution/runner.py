"""The job runner that lives in each warm sandbox container (stdlib only; Python 3.11 in the image).

Never imported on the host: :mod:`ptfactory.filters.execution.docker_sandbox` sends this file's source into
the container, where it runs as uid nobody under one long-lived ``docker exec`` and takes jobs as
JSON lines on stdin, answering each with one JSON line on stdout. That saves a ``docker exec``
(an HTTP round trip, a runc namespace join and an inspect) per job, which was most of a job's cost.

A job: a fresh directory holding its files, its command under ``timeout -s KILL`` with stdin
from /dev/null and its output on pipes that only this runner reads (so a job cannot write to the
control channel), ``oom_score_adj`` 1000 so the kernel's OOM killer picks the job, not the runner.
After the job every process but this one and PID 1 is killed (``kill(-1)`` spares the caller on
Linux) and the runner waits until PID 1 has reaped them (a zombie holds a place under the pids cap), /work and /tmp are emptied, and the answer says whether that left the container clean.
The runner makes itself non-dumpable so that a job running under the same uid cannot open its
/proc/PID/fd entries or ptrace it; a job can still SIGKILL it, which ends the stream: the host then
recycles the container.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from typing import Any

_PR_SET_DUMPABLE = 4
_DEADLINE_GRACE_S = 2.0  # past the in-container `timeout`, the runner kills the job itself
_DRAIN_S = 0.5  # how long output left by a job's children is read after the job ends
_REAP_S = 5.0  # how long a job's killed processes may take to be reaped; past it, not clean
# Raised in the job's own shell: this runner is non-dumpable, so a child's /proc/self stays root's
# until it execs.
_OOM_FIRST = 'echo 1000 > /proc/self/oom_score_adj; exec "$@"'


def _non_dumpable() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):  # no libc prctl: the forged-answer test would say so
        pass


def _others() -> list[int]:
    """Processes other than this one and PID 1, zombies included: a zombie still holds its place
    under the container's pids cap until it is reaped."""
    me = os.getpid()
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) not in (1, me)]


def _kill_all() -> bool:
    """Kill every process but this one and PID 1 and wait until each is reaped; True when none is
    left. Orphans are reaped by PID 1, not here: returning while they are zombies would let the
    next job's first fork fail on the pids cap a fork bomb filled."""
    deadline = time.monotonic() + _REAP_S
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap()
        if not _others():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _empty(directory: str) -> bool:
    def unlock(function: Any, path: str, _exc: Any) -> None:
        os.chmod(os.path.dirname(path) or path, 0o700)  # a job may have chmod-ed its way out
        function(path)

    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
                shutil.rmtree(path, onerror=unlock)
            else:
                os.unlink(path)
        except OSError:
            return False
    return True


class _Tail:
    """The last ``keep`` bytes of a stream and how many bytes it carried."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > self.keep:
            del self.data[: len(self.data) - self.keep]


def _tree_hash(directory: str) -> str:
    """sha256 over the workspace's paths, kinds, modes and contents (regular files only are read,
    never followed links or FIFOs): agent episodes record it after every step, and replay compares it."""
    digest = hashlib.sha256()
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(dirs + names):
            path = os.path.join(root, name)
            info = os.lstat(path)
            digest.update(f"{os.path.relpath(path, directory)}\0{info.st_mode:o}\0".encode())
            if stat.S_ISLNK(info.st_mode):
                digest.update(os.readlink(path).encode())
            elif stat.S_ISREG(info.st_mode):
                try:
                    with open(path, "rb") as handle:
                        for block in iter(lambda: handle.read(1 << 20), b""):
                            digest.update(block)
                except OSError:  # a file the job made unreadable is hashed by its mode alone
                    digest.update(b"\0unreadable")
            digest.update(b"\n")
    return digest.hexdigest()


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    directory = job["dir"]
    # an agent episode keeps its workspace across jobs: it is created once and never emptied
    persist = bool(job.get("persist"))
    if persist:
        os.makedirs(directory, 0o700, exist_ok=True)
    else:
        os.mkdir(directory, 0o700)
    for name, content in job["files"].items():
        path = os.path.join(directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(content))
    timeout_s, limit, keep = float(job["timeout"]), int(job["output_bytes"]), int(job["keep"])
    started = time.monotonic()
    process = subprocess.Popen(
        ["sh", "-c", _OOM_FIRST, "sh", "timeout", "-s", "KILL", f"{timeout_s:g}", *job["command"]],
        cwd=directory,
        env=job["env"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    stdout, stderr = _Tail(keep), _Tail(keep)
    streams = {process.stdout.fileno(): stdout, process.stderr.fileno(): stderr}
    exited = os.pidfd_open(process.pid)
    poller = select.poll()
    for fd in (*streams, exited):
        poller.register(fd, select.POLLIN)
    deadline, drain_until = started + timeout_s + _DEADLINE_GRACE_S, 0.0
    flooded = overran = False
    open_streams = set(streams)
    # until the job has exited and its output is read (or its children held the pipes too long)
    while open_streams or not drain_until:
        now = time.monotonic()
        if drain_until and now > drain_until:
            break
        if not drain_until and now > deadline:
            overran = True
            break
        for fd, _ in poller.poll(max(0.0, (drain_until or deadline) - now) * 1000):
            if fd == exited:
                # the job is over; its children may hold the pipes open: read what is there, briefly
                poller.unregister(exited)
                drain_until = time.monotonic() + _DRAIN_S
                continue
            chunk = os.read(fd, 65536)
            if chunk:
                streams[fd].add(chunk)
            else:
                poller.unregister(fd)
                open_streams.discard(fd)
        if stdout.total + stderr.total > limit:
            flooded = True
            break
    duration_ms = (time.monotonic() - started) * 1000
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    exit_code = process.wait()  # before _kill_all reaps: that would take the job's status
    clean = _kill_all()
    if exit_code < 0:  # killed by a signal (the runner's own kill, or the job's `kill -1`)
        exit_code = 128 - exit_code
    process.stdout.close()
    process.stderr.close()
    os.close(exited)
    tree = _tree_hash(directory) if persist else None
    clean = (persist or _empty("/work")) and _empty("/tmp") and clean
    return {
        "tree": tree,
        "exit_code": 137 if overran else exit_code,
        "duration_ms": duration_ms,
        "flooded": flooded,
        "overran": overran,
        "clean": clean,
        "stdout": base64.b64encode(bytes(stdout.data)).decode(),
        "stderr": base64.b64encode(bytes(stderr.data)).decode(),
        "stdout_bytes": stdout.total,
        "stderr_bytes": stderr.total,
    }


def main() -> None:
    _non_dumpable()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        job = json.loads(line)
        try:
            answer = run_job(job)
        except Exception as exc:  # the host reports a sandbox_error and recycles the container
            _kill_all()
            answer = {"error": f"{type(exc).__name__}: {exc}", "clean": False}
        answer["id"] = job["id"]
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
