"""Fallback sandbox where no Docker engine answers: bubblewrap, as uid nobody, with rlimits.

``setpriv`` drops to nobody with no capabilities and no-new-privs; ``bwrap --unshare-all``
gives new user, pid, network, ipc and uts namespaces with only /usr visible read-only and the
job's directory as /work; ``prlimit`` caps address space, processes, file size and CPU time;
a wall-clock timeout kills the whole session. Weaker than the Docker sandbox (rlimits, not
cgroups; a shared kernel either way), so selecting it always prints a warning.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ptfactory.errors import SandboxError
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.limits import ExecResult, Limits, tail

__all__ = ["BwrapSandbox", "bwrap_available"]

_NOBODY = 65534


def bwrap_available() -> str | None:
    """None if bwrap can run here, else why not."""
    for tool in ("bwrap", "setpriv", "prlimit"):
        if not shutil.which(tool):
            return f"{tool} is missing (apt-get install -y bubblewrap util-linux)"
    return None


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(self, limits: Limits | None = None, workers: int | None = None) -> None:
        super().__init__(limits, workers)
        if reason := bwrap_available():
            raise SandboxError(f"the bwrap sandbox cannot run: {reason}")

    def _argv(self, command: Sequence[str], limits: Limits) -> list[str]:
        privileges = (
            [
                "setpriv",
                f"--reuid={_NOBODY}",
                f"--regid={_NOBODY}",
                "--clear-groups",
                "--no-new-privs",
                "--inh-caps=-all",
                "--bounding-set=-all",
            ]
            if os.geteuid() == 0
            else []
        )
        return [
            *privileges,
            "bwrap",
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--setenv",
            "HOME",
            "/work",
            "--setenv",
            "PYTHONDONTWRITEBYTECODE",
            "1",
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--bind",
            "{workdir}",
            "/work",
            "--chdir",
            "/work",
            "prlimit",
            f"--as={limits.memory_mb * 1024 * 1024}",
            f"--nproc={limits.pids}",
            f"--fsize={limits.workdir_mb * 1024 * 1024}",
            f"--cpu={int(limits.timeout_s) + 1}",
            "--nofile=256",
            *command,
        ]

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        limits = limits or self.limits
        workdir = Path(tempfile.mkdtemp(prefix="ptf-bwrap-"))
        try:
            for name, content in files.items():
                target = workdir / name
                target.write_bytes(content.encode() if isinstance(content, str) else content)
            if os.geteuid() == 0:
                os.chown(workdir, _NOBODY, _NOBODY)
                for path in workdir.iterdir():
                    os.chown(path, _NOBODY, _NOBODY)
            argv = [str(workdir) if a == "{workdir}" else a for a in self._argv(command, limits)]
            return self._execute(argv, limits)
        except OSError as exc:
            return ExecResult("sandbox_error", None, 0.0, detail=f"{type(exc).__name__}: {exc}")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _execute(self, argv: list[str], limits: Limits) -> ExecResult:
        started = time.perf_counter()
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={"PATH": "/usr/bin:/bin"},
        )
        streams: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}
        total = [0]
        flooded = threading.Event()

        def pump(name: str, stream: object) -> None:
            for chunk in iter(lambda: stream.read(65536), b""):  # type: ignore[attr-defined]
                total[0] += len(chunk)
                buffer = streams[name]
                buffer += chunk
                if len(buffer) > limits.tail_bytes * 4:
                    del buffer[: len(buffer) - limits.tail_bytes * 4]
                if total[0] > limits.output_bytes:
                    flooded.set()
                    _kill(process)
                    return

        readers = [
            threading.Thread(target=pump, args=(n, s), daemon=True)
            for n, s in (("out", process.stdout), ("err", process.stderr))
        ]
        for reader in readers:
            reader.start()
        timed_out = False
        try:
            process.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(process)
            process.wait()
        for reader in readers:
            reader.join(5)
        duration_ms = (time.perf_counter() - started) * 1000
        out, err = (
            tail(bytes(streams["out"]), limits.tail_bytes),
            tail(bytes(streams["err"]), limits.tail_bytes),
        )
        code = process.returncode
        if flooded.is_set():
            return ExecResult(
                "output_limit", code, duration_ms, out, err, f"more than {limits.output_bytes} bytes"
            )
        if timed_out:
            return ExecResult("timeout", code, duration_ms, out, err, f"killed after {limits.timeout_s:g}s")
        if code != 0 and "MemoryError" in err:
            return ExecResult(
                "oom", code, duration_ms, out, err, f"address space capped at {limits.memory_mb} MB"
            )
        return ExecResult(
            "passed" if code == 0 else "failed",
            code,
            duration_ms,
            out,
            err,
            "" if code == 0 else f"exit code {code}",
        )


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
