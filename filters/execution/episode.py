"""Agent episodes: one sandbox container per episode, its workspace kept across steps.

An :class:`EpisodePool` wraps the warm-pool :class:`~ptfactory.filters.execution.docker_sandbox.DockerSandbox`
(the same container isolation as code validation: no network, read-only root, tmpfs workspace,
uid nobody, caps dropped, memory/pids/CPU caps). :meth:`EpisodePool.open` leases one container
for the episode and copies the workspace in; every step is one job of the container's runner in
the episode's directory (a per-call timeout, an output cap, every process the step left killed
after it) and answers the workspace's hash after it; :meth:`Episode.close` destroys the container.

Shell steps pass the :class:`~ptfactory.filters.execution.commands.CommandPolicy` first: a refused
command is not executed. A step that takes the container down (``kill -9 -1``, the OOM killer)
ends the episode: its later steps answer ``sandbox_error``; the pool serves other episodes.

The bubblewrap fallback refuses agent episodes with a clear message: its rlimits cap one file's
size, not a workspace kept on the host across steps, so it cannot give the same guarantees.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ptfactory.errors import SandboxError
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.commands import CommandPolicy
from ptfactory.filters.execution.limits import ExecResult, Limits

__all__ = ["Episode", "EpisodePool", "StepResult", "safe_path"]

_WORKSPACE = "/work/episode"
_READ_BYTES = 16000  # read_file returns at most this much of a file
# write_file: the runner drops the content next to the workspace, a job moves it into place, so a
# bad target (a folder, a read-only path) is the step's error, not the runner's
_INCOMING = "../.ptf-incoming"
_MOVE_IN = (
    "import os, sys\n"
    "src, dst = '/work/.ptf-incoming', sys.argv[1]\n"
    "try:\n"
    "    os.makedirs(os.path.dirname(dst) or '.', exist_ok=True)\n"
    "    os.replace(src, dst)\n"
    "except OSError as exc:\n"
    "    os.unlink(src)\n"
    "    sys.exit(f'error: {exc}')\n"
)


@dataclass
class StepResult:
    status: str  # passed | failed | timeout | oom | output_limit | sandbox_error | policy_violation
    exit_code: int | None
    duration_ms: float
    output: str  # stdout then stderr, each tail-capped
    tree_hash: str | None  # the workspace after the step; None when the container is gone
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def safe_path(path: str) -> str | None:
    """None if ``path`` is a relative path inside the workspace, else why not."""
    if not isinstance(path, str) or not path.strip():
        return "an empty path"
    if path.startswith(("/", "~")) or "\\" in path or "\0" in path:
        return f"{path!r} is not a relative path inside the workspace"
    if ".." in path.split("/"):
        return f"{path!r} leaves the workspace ('..')"
    if posixpath.normpath(path) in (".", ""):
        return f"{path!r} names the workspace itself, not a file"
    return None


class EpisodePool:
    """Episodes on a Docker sandbox; at most ``sandbox.workers`` live at once (each holds a container)."""

    def __init__(self, sandbox: Sandbox, policy: CommandPolicy | None = None) -> None:
        from ptfactory.filters.execution.docker_sandbox import DockerSandbox

        if not isinstance(sandbox, DockerSandbox):
            raise SandboxError(
                f"agent episodes need the Docker sandbox, not the {sandbox.backend} one: the bubblewrap "
                "fallback caps one file's size but not a workspace kept across steps, so it cannot give "
                "an episode the same isolation; start a Docker engine (scripts/setup-system.sh) and "
                "build the image (`ptf sandbox build`)"
            )
        self.sandbox: DockerSandbox = sandbox
        self.policy = policy or CommandPolicy()
        self.workers = sandbox.workers
        self.limits = sandbox.limits

    def open(self, files: Mapping[str, str | bytes], limits: Limits | None = None) -> Episode:
        """A fresh container holding ``files`` (paths checked: relative, inside the workspace)."""
        for path in files:
            if reason := safe_path(path):
                raise SandboxError(f"workspace file: {reason}")
        return Episode(self, dict(files), limits or self.limits)

    def close(self) -> None:
        self.sandbox.close()


class Episode:
    def __init__(self, pool: EpisodePool, files: dict[str, str | bytes], limits: Limits) -> None:
        self.pool = pool
        self.limits = limits
        self.sandbox_s = 0.0
        self._lock = threading.Lock()  # one step at a time: steps of an episode are ordered
        self._slot: Any = pool.sandbox.lease()
        self._closed = False
        setup = self._job(files, ["true"])
        if setup.status != "passed":
            self.close()
            raise SandboxError(f"could not copy the workspace into the sandbox: {setup.detail}")
        self.initial_hash = setup.tree_hash

    @property
    def alive(self) -> bool:
        return not self._closed and not self._slot.discarded

    def _job(self, files: Mapping[str, str | bytes], argv: list[str]) -> StepResult:
        with self._lock:
            if self._closed:
                return StepResult("sandbox_error", None, 0.0, "", None, "the episode is closed")
            result, tree = self.pool.sandbox.run_leased(self._slot, _WORKSPACE, files, argv, self.limits)
        self.sandbox_s += result.duration_ms / 1000
        return _step(result, tree)

    # -- the tools ------------------------------------------------------------------------------

    def bash(self, script: str) -> StepResult:
        """Run a shell script in the workspace, after the command policy allowed every command in it."""
        if reason := self.pool.policy.check_script(script):
            return StepResult("policy_violation", None, 0.0, "", None, reason)
        return self._job({}, ["bash", "-c", script])

    def read_file(self, path: str) -> StepResult:
        if reason := safe_path(path):
            return StepResult("failed", 2, 0.0, f"error: {reason}\n", None, reason)
        return self._job({}, ["head", "-c", str(_READ_BYTES), "--", path])

    def write_file(self, path: str, content: str) -> StepResult:
        if reason := safe_path(path):
            return StepResult("failed", 2, 0.0, f"error: {reason}\n", None, reason)
        result = self._job({_INCOMING: content}, ["python3", "-c", _MOVE_IN, path])
        if result.status == "passed":
            result.output = f"wrote {len(content.encode())} bytes to {path}\n"
        return result

    def run_check(self, command: str) -> StepResult:
        """The task's own check (not subject to the policy: it is the task's, not the model's)."""
        return self._job({}, ["bash", "-c", command])

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.pool.sandbox.end_lease(self._slot)

    def __enter__(self) -> Episode:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _step(result: ExecResult, tree: str | None) -> StepResult:
    output = result.stdout_tail + result.stderr_tail
    return StepResult(
        result.status, result.exit_code, round(result.duration_ms, 2), output, tree, result.detail
    )
