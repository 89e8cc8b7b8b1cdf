"""Docker sandbox with a warm pool of locked-down containers.

Every container: no network, read-only root, tmpfs work dir (noexec, nosuid, nodev), memory and
swap capped together, a pids cap, a CPU quota, uid nobody, every capability dropped,
``no-new-privileges``, and an environment of three variables (never the host's). A job gets a
fresh directory in a warm container, runs under an in-container ``timeout -s KILL`` with an
outer watchdog, and is cleaned up after (every process it left is killed, its directory
removed). A container is recycled after ``jobs_per_container`` jobs or after any violation
(timeout, OOM, output flood, sandbox error).
"""

from __future__ import annotations

import base64
import contextlib
import json
import queue
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from filters.execution.base import Sandbox
from filters.execution.image import IMAGE, find_image
from filters.execution.limits import ExecResult, Limits, tail
from ptfactory.errors import SandboxError

__all__ = ["DockerSandbox", "docker_client"]

_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work", "PYTHONDONTWRITEBYTECODE": "1"}
_NOBODY = "65534:65534"
_CHUNK = 100_000  # argv strings above 128 KiB are refused by execve
_WATCHDOG_GRACE_S = 5.0
# Writes the job's files into a fresh directory, then becomes the job's command; a plain
# `python3 FILE` runs in this interpreter (runpy) instead of starting a second one.
_BOOT = (
    "import base64,json,os,runpy,sys\n"
    "d=sys.argv[1];n=int(sys.argv[2]);os.mkdir(d,0o700);os.chdir(d)\n"
    "for k,v in json.loads(base64.b64decode(''.join(sys.argv[3:3+n]))).items():\n"
    " open(k,'wb').write(base64.b64decode(v))\n"
    "c=sys.argv[3+n:]\n"
    "if len(c)==2 and c[0]=='python3':\n"
    " sys.argv=[c[1]];sys.path.insert(0,d)\n"
    " runpy.run_path(c[1],run_name='__main__')\n"
    "else:\n"
    " os.execvp(c[0],c)\n"
)
# Runs the job, then kills whatever it left running (PID 1 is immune) and removes its directory,
# in the same exec: one round trip to the engine per job. If the job kills this wrapper too
# (`kill -9 -1`), the sandbox notices (exit 137) and cleans up with a second exec.
_WRAP = 'timeout -s KILL "$0" "$@"; rc=$?; kill -9 -1 2>/dev/null; rm -rf "$JOB_DIR"; exit $rc'


def docker_client() -> Any:
    """A client for the local engine, or :class:`SandboxError` saying how to start one."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # any failure here means "no engine": say how to fix it
        raise SandboxError(
            f"no Docker engine answers ({exc}); install docker.io and start dockerd, or use the bwrap backend"
        ) from exc
    return client


class _Slot:
    """One warm container and how many jobs it has served."""

    def __init__(self, container: Any) -> None:
        self.container = container
        self.jobs = 0
        self.discarded = False
        self.cgroup = Path(f"/sys/fs/cgroup/memory/docker/{container.id}/memory.oom_control")

    def oom_kills(self) -> int:
        """The kernel's OOM-kill counter for this container (cgroup v1), or -1 if unreadable."""
        try:
            text = self.cgroup.read_text()
        except OSError:
            return -1
        for line in text.splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return -1


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(
        self,
        limits: Limits | None = None,
        workers: int | None = None,
        image: str | None = None,
        jobs_per_container: int = 100,
        client: Any = None,
    ) -> None:
        super().__init__(limits, workers)
        self.client = client or docker_client()
        self.image = image or find_image(self.client)
        if self.image is None:
            raise SandboxError(
                f"the sandbox image {IMAGE} is not built for this recipe: run `ptf sandbox build`"
            )
        self.jobs_per_container = jobs_per_container
        self.session = uuid.uuid4().hex[:12]
        self._idle: queue.Queue[_Slot] = queue.Queue()
        self._created = 0
        self._lock = threading.Lock()
        self._closed = False

    # -- the pool -----------------------------------------------------------------------------

    def _create(self) -> _Slot:
        limits = self.limits
        memory = f"{limits.memory_mb}m"
        container = self.client.containers.run(
            self.image,
            command=["python3", "/opt/ptf/init.py"],
            detach=True,
            network_mode="none",
            read_only=True,
            tmpfs={
                "/work": f"rw,noexec,nosuid,nodev,size={limits.workdir_mb}m,mode=1777",
                "/tmp": "rw,noexec,nosuid,nodev,size=16m,mode=1777",
            },
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9),
            user=_NOBODY,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            environment=_ENV,
            ipc_mode="none",
            labels={"ptf.sandbox": self.session},
            working_dir="/work",
        )
        with self._lock:
            self._created += 1
        return _Slot(container)

    def _acquire(self) -> _Slot:
        if self._closed:
            raise SandboxError("the sandbox is closed")
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            with self._lock:
                room = self._created < self.workers
            return self._create() if room else self._idle.get()

    def _release(self, slot: _Slot, recycle: bool) -> None:
        slot.jobs += 1
        if recycle or slot.jobs >= self.jobs_per_container or self._closed:
            self._discard(slot)
            if not self._closed:
                try:
                    self._idle.put(self._create())
                except Exception:  # the next acquire creates one instead
                    pass
            return
        self._idle.put(slot)

    def _discard(self, slot: _Slot) -> None:
        """Remove the slot's container, once (a watchdog and the job's end may both ask)."""
        with self._lock:
            if slot.discarded:
                return
            slot.discarded = True
            self._created -= 1
        with contextlib.suppress(Exception):  # already gone is fine
            slot.container.remove(force=True)

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                slot = self._idle.get_nowait()
            except queue.Empty:
                break
            self._discard(slot)
        for container in self.client.containers.list(
            all=True, filters={"label": f"ptf.sandbox={self.session}"}
        ):
            container.remove(force=True)

    # -- a job --------------------------------------------------------------------------------

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        limits = limits or self.limits
        slot = self._acquire()
        recycle = True
        try:
            result = self._run_in(slot, files, command, limits)
            recycle = result.status in ("timeout", "oom", "output_limit", "sandbox_error")
            return result
        except Exception as exc:  # a broken container is a sandbox_error, never a crash
            return ExecResult("sandbox_error", None, 0.0, detail=f"{type(exc).__name__}: {exc}")
        finally:
            self._release(slot, recycle)

    def _run_in(
        self, slot: _Slot, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits
    ) -> ExecResult:
        api = self.client.api
        job_dir = f"/work/j{uuid.uuid4().hex[:16]}"
        encoded = {
            name: base64.b64encode(c.encode() if isinstance(c, str) else c).decode()
            for name, c in files.items()
        }
        payload = base64.b64encode(json.dumps(encoded).encode()).decode()
        chunks = [payload[i : i + _CHUNK] for i in range(0, len(payload), _CHUNK)] or [""]
        argv = [
            "sh",
            "-c",
            _WRAP,
            f"{limits.timeout_s:g}",
            "python3",
            "-c",
            _BOOT,
            job_dir,
            str(len(chunks)),
            *chunks,
            *command,
        ]
        oom_before = slot.oom_kills()
        exec_id = api.exec_create(
            slot.container.id, argv, user=_NOBODY, workdir="/work", environment={**_ENV, "JOB_DIR": job_dir}
        )["Id"]
        watchdog_fired = threading.Event()

        def watchdog() -> None:
            watchdog_fired.set()
            self._discard(slot)

        timer = threading.Timer(limits.timeout_s + _WATCHDOG_GRACE_S, watchdog)
        started = time.perf_counter()
        timer.start()
        out, err, flooded, total = bytearray(), bytearray(), False, 0
        stream = api.exec_start(exec_id, stream=True, demux=True)
        try:
            for stdout, stderr in stream:
                out += stdout or b""
                err += stderr or b""
                total += len(stdout or b"") + len(stderr or b"")
                if total > limits.output_bytes:
                    flooded = True
                    break
                keep = limits.tail_bytes * 4  # bounded memory however much the job prints
                if len(out) > keep:
                    del out[: len(out) - keep]
                if len(err) > keep:
                    del err[: len(err) - keep]
        finally:
            timer.cancel()
        duration_ms = (time.perf_counter() - started) * 1000
        if flooded:
            # The container is recycled after a flood: removing it now stops the writer and frees
            # the daemon, which would otherwise block on the stream we no longer read. (`docker
            # kill` can wait ~10 s here; a forced remove is immediate.)
            stream.close()
            self._discard(slot)
            return ExecResult(
                "output_limit",
                None,
                duration_ms,
                tail(bytes(out), limits.tail_bytes),
                tail(bytes(err), limits.tail_bytes),
                f"more than {limits.output_bytes} bytes of output",
            )
        if watchdog_fired.is_set():
            return ExecResult(
                "timeout",
                None,
                duration_ms,
                tail(bytes(out), limits.tail_bytes),
                tail(bytes(err), limits.tail_bytes),
                "killed by the outer watchdog",
            )
        exit_code = api.exec_inspect(exec_id).get("ExitCode")
        oom_after = slot.oom_kills()
        if exit_code == 137:  # the wrapper may have died with the job: clean up separately
            self._cleanup(slot, job_dir)
        stdout_tail, stderr_tail = tail(bytes(out), limits.tail_bytes), tail(bytes(err), limits.tail_bytes)
        if oom_before >= 0 and oom_after > oom_before:
            status, detail = "oom", f"OOM-killed at {limits.memory_mb} MB"
        elif exit_code == 137 and duration_ms >= limits.timeout_s * 1000 * 0.98:
            status, detail = "timeout", f"killed after {limits.timeout_s:g}s"
        elif exit_code == 0:
            status, detail = "passed", ""
        else:
            status, detail = "failed", f"exit code {exit_code}"
        return ExecResult(status, exit_code, duration_ms, stdout_tail, stderr_tail, detail)

    def _cleanup(self, slot: _Slot, job_dir: str) -> None:
        """Kill everything the job left running (PID 1 is immune) and remove its directory."""
        api = self.client.api
        script = f"kill -9 -1 2>/dev/null; rm -rf {job_dir}"
        exec_id = api.exec_create(slot.container.id, ["sh", "-c", script], user=_NOBODY, environment=_ENV)[
            "Id"
        ]
        api.exec_start(exec_id)
