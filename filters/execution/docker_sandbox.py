"""Docker sandbox with a warm pool of locked-down containers.

Every container: no network, read-only root, tmpfs work dir, /tmp and /dev/shm (multiprocessing's
semaphores; all noexec, nosuid, nodev), memory and swap capped together, a pids cap, a CPU quota,
uid nobody, every capability dropped, ``no-new-privileges``, and an environment of three
variables (never the host's). A job gets a fresh directory in a warm container, runs under an
in-container ``timeout -s KILL`` with an outer watchdog, and is cleaned up after (every process it left is killed, its directory
removed). Jobs reach a container through one long-lived runner (:mod:`ptfactory.filters.execution.runner`)
over the attached stdin/stdout of a single ``docker exec``, not one exec per job. A container is recycled after ``jobs_per_container`` jobs or after any violation
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

from ptfactory.errors import SandboxError
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.image import IMAGE, find_image
from ptfactory.filters.execution.limits import ExecResult, Limits, tail
from ptfactory.filters.execution.oom import OomWatch

__all__ = ["DockerSandbox", "docker_client"]

_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work", "PYTHONDONTWRITEBYTECODE": "1"}
_NOBODY = "65534:65534"
_WATCHDOG_GRACE_S = 5.0  # past the runner's own deadline (timeout + 2 s)
_START_S = 30.0  # for a fresh container's runner to say it is ready
# The runner's source travels base64-encoded in argv, so a job listing /proc sees no code.
_RUNNER = base64.b64encode((Path(__file__).parent / "runner.py").read_bytes()).decode()
_LOADER = "import base64,sys;exec(compile(base64.b64decode(sys.argv[1]),'ptf-runner','exec'))"


def docker_client() -> Any:
    """A client for the local engine, or :class:`SandboxError` saying how to start one."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # any failure here means "no engine": say how to fix it
        raise SandboxError(
            f"no Docker engine answers ({exc}); start it (`sudo systemctl start docker`, or "
            "`sudo dockerd &`; install it with `apt-get install -y docker.io`)"
        ) from exc
    return client


class _Slot:
    """One warm container, the runner inside it, and how many jobs it has served."""

    def __init__(self, container: Any, channel: Any) -> None:
        self.container = container
        self.channel = channel  # the runner's stdin (to write) and multiplexed stdout/stderr
        self.buffer = bytearray()
        self.stderr = bytearray()
        self.jobs = 0
        self.discarded = False
        self.tree: str | None = None  # an episode's workspace hash after its last job
        self.oom = OomWatch(container.id)  # what the engine says of OOM kills in it

    def send(self, message: Mapping[str, Any]) -> None:
        self.channel._sock.sendall(json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, Any] | None:
        """The runner's next answer, or None when its stream ended (it or its container died)."""
        from docker.utils.socket import next_frame_header, read_exactly

        while b"\n" not in self.buffer:
            try:
                stream, size = next_frame_header(self.channel)
                if size < 0:
                    return None
                data = read_exactly(self.channel, size)
            except Exception:  # a socket closed under us by the watchdog, or a dead daemon
                return None
            if stream == 2:
                self.stderr += data
                del self.stderr[:-4000]
            else:
                self.buffer += data
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        answer: dict[str, Any] = json.loads(line)
        return answer


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
        self._starting = 0  # containers being created: counted against ``workers`` too
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
                # POSIX semaphores (multiprocessing's locks, a Pool, a ProcessPoolExecutor) live in
                # /dev/shm, which ipc_mode="none" leaves out; its pages count against mem_limit
                "/dev/shm": "rw,noexec,nosuid,nodev,size=16m,mode=1777",
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
            # a job can write to PID 1's stdout; with no log driver that fills no file on the host
            log_config={"type": "none", "config": {}},
        )
        with self._lock:
            self._created += 1
        try:
            slot = _Slot(container, self._start_runner(container))
            timer = threading.Timer(_START_S, lambda: self._discard(slot))
            timer.start()
            try:
                ready = slot.receive()
            finally:
                timer.cancel()
            if not ready or not ready.get("ready"):
                raise SandboxError(
                    f"the sandbox runner did not start: {slot.stderr.decode(errors='replace')}"
                )
        except Exception:
            self._discard(_Slot(container, None))
            raise
        return slot

    def _start_runner(self, container: Any) -> Any:
        api = self.client.api
        exec_id = api.exec_create(
            container.id,
            ["python3", "-c", _LOADER, _RUNNER],
            stdin=True,
            user=_NOBODY,
            workdir="/",
            environment=_ENV,
        )["Id"]
        channel = api.exec_start(exec_id, socket=True)
        channel._sock.settimeout(None)  # the watchdog bounds every wait instead
        return channel

    def _reserve(self) -> bool:
        """Take room for one more container, if the pool has it. Checked and taken under one lock:
        threads of concurrent ``run_many`` calls (a Ray node's pool runs two chunks at once) must
        not each see the last free place and start a container past ``workers``."""
        with self._lock:
            if self._created + self._starting >= self.workers:
                return False
            self._starting += 1
            return True

    def _create_reserved(self) -> _Slot:
        try:
            return self._create()
        finally:
            with self._lock:
                self._starting -= 1

    def _acquire(self) -> _Slot:
        while True:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            try:
                return self._idle.get_nowait()
            except queue.Empty:
                pass
            if self._reserve():
                return self._create_reserved()
            try:  # a slot comes back; or one is discarded without a replacement (an episode's end),
                return self._idle.get(timeout=0.2)  # and its place frees up: look again
            except queue.Empty:
                continue

    def _release(self, slot: _Slot, recycle: bool) -> None:
        slot.jobs += 1
        if recycle or slot.discarded or slot.jobs >= self.jobs_per_container or self._closed:
            self._discard(slot)
            if not self._closed and self._reserve():  # else another thread is starting one
                try:
                    self._idle.put(self._create_reserved())
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
        if slot.channel is not None:
            with contextlib.suppress(Exception):
                slot.channel.close()

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

    # -- an agent episode: one container held for all its steps (filters/execution/episode.py) --

    def lease(self) -> _Slot:
        """A warm container for one episode; its workspace lives until :meth:`end_lease`."""
        return self._acquire()

    def run_leased(
        self,
        slot: _Slot,
        directory: str,
        files: Mapping[str, str | bytes],
        command: Sequence[str],
        limits: Limits,
    ) -> tuple[ExecResult, str | None]:
        """One step in the leased container's persistent ``directory``: the result and the
        workspace hash after it (None when the step took the container down)."""
        if slot.discarded:
            return ExecResult("sandbox_error", None, 0.0, detail="the episode's container is gone"), None
        try:
            result = self._run_in(slot, files, command, limits, persist=directory)
        except Exception as exc:  # a broken container is a sandbox_error, never a crash
            self._discard(slot)
            return ExecResult("sandbox_error", None, 0.0, detail=f"{type(exc).__name__}: {exc}"), None
        return result, None if slot.discarded else slot.tree

    def end_lease(self, slot: _Slot) -> None:
        """Destroy the episode's container; the next lease starts a fresh one (not before: after
        the last episode of a run it would be made only to be removed)."""
        self._discard(slot)

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
        self,
        slot: _Slot,
        files: Mapping[str, str | bytes],
        command: Sequence[str],
        limits: Limits,
        persist: str | None = None,
    ) -> ExecResult:
        job_id = uuid.uuid4().hex
        job_dir = persist or f"/work/j{job_id[:16]}"
        watchdog_fired = threading.Event()

        def watchdog() -> None:
            watchdog_fired.set()
            self._discard(slot)

        timer = threading.Timer(limits.timeout_s + 2.0 + _WATCHDOG_GRACE_S, watchdog)
        started = time.perf_counter()
        timer.start()
        try:
            slot.send(
                {
                    "id": job_id,
                    "dir": job_dir,
                    "files": {
                        name: base64.b64encode(c.encode() if isinstance(c, str) else c).decode()
                        for name, c in files.items()
                    },
                    "command": list(command),
                    "env": {**_ENV, "JOB_DIR": job_dir},
                    "timeout": limits.timeout_s,
                    "output_bytes": limits.output_bytes,
                    "keep": limits.tail_bytes + 1,  # one more byte than the tail says "truncated"
                    "persist": persist is not None,
                }
            )
            answer = slot.receive()
            while answer is not None and answer.get("id") != job_id:  # never expected; be strict
                answer = slot.receive()
        finally:
            timer.cancel()
        duration_ms = (time.perf_counter() - started) * 1000
        if watchdog_fired.is_set():
            return ExecResult("timeout", None, duration_ms, detail="killed by the outer watchdog")
        if answer is None:
            # The runner's stream ended mid-job: the job killed it (`kill -1`), or the kernel's OOM
            # killer did. The container is recycled either way (after asking: the engine answers
            # about a container it still has).
            killed_by_oom = slot.oom.killed(self.client)
            self._discard(slot)
            if killed_by_oom:
                return ExecResult("oom", 137, duration_ms, detail=f"OOM-killed at {limits.memory_mb} MB")
            return ExecResult(
                "failed", 137, duration_ms, detail="the job killed every process in its sandbox"
            )
        if "error" in answer:
            self._discard(slot)
            return ExecResult("sandbox_error", None, duration_ms, detail=f"sandbox runner: {answer['error']}")
        if not answer["clean"]:
            self._discard(slot)  # processes or files it could not remove: never reuse
        slot.tree = answer.get("tree")
        exit_code = int(answer["exit_code"])
        duration_ms = float(answer["duration_ms"])
        stdout_tail = tail(base64.b64decode(answer["stdout"]), limits.tail_bytes)
        stderr_tail = tail(base64.b64decode(answer["stderr"]), limits.tail_bytes)
        # a job the runner did not kill for its deadline, dead of SIGKILL: the OOM killer's, or its own
        sigkilled = exit_code == 137 and not answer["overran"] and not answer["flooded"]
        if answer["flooded"]:
            status, detail = "output_limit", f"more than {limits.output_bytes} bytes of output"
        elif sigkilled and slot.oom.killed(self.client):
            status, detail = "oom", f"OOM-killed at {limits.memory_mb} MB"
        elif answer["overran"] or (exit_code == 137 and duration_ms >= limits.timeout_s * 1000 * 0.98):
            status, detail = "timeout", f"killed after {limits.timeout_s:g}s"
        elif exit_code == 0:
            status, detail = "passed", ""
        else:
            status, detail = "failed", f"exit code {exit_code}"
        return ExecResult(status, exit_code, duration_ms, stdout_tail, stderr_tail, detail)
