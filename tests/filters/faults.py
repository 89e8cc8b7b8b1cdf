"""Sandboxes with broken infrastructure, for the tests of what a fault is (tests/filters)."""

from collections.abc import Mapping, Sequence

from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.limits import ExecResult, Limits

__all__ = ["DyingSandbox"]


class DyingSandbox(Sandbox):
    """A real sandbox with its infrastructure broken: every process in the container dies under
    every job, whatever the job (as when the engine or the host's OOM killer takes the container).
    Neither the solution's program nor a control program gets to run."""

    def __init__(self, inner: Sandbox) -> None:
        super().__init__(inner.limits, inner.workers)
        self.inner = inner
        self.backend = inner.backend
        self.jobs = 0

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        self.jobs += 1
        return self.inner.run(files, ["python3", "-c", "import os; os.kill(-1, 9)"], limits)
