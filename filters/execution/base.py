"""The sandbox interface: run files with a command under limits, in isolation, and say what happened."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from ptfactory.filters.execution.limits import ExecResult, Limits

__all__ = ["Job", "Sandbox"]


@dataclass(frozen=True)
class Job:
    files: Mapping[str, str | bytes]
    command: Sequence[str] = field(default_factory=lambda: ["python3", "program.py"])


class Sandbox(ABC):
    """Untrusted code runs only behind this interface.

    ``run`` never raises for what the code does (a crash, a hang, a flood are statuses); it
    raises :class:`~ptfactory.errors.SandboxError` only when the sandbox itself cannot work.
    """

    backend = "abstract"

    def __init__(self, limits: Limits | None = None, workers: int | None = None) -> None:
        self.limits = limits or Limits()
        self.workers = workers or os.cpu_count() or 1

    @abstractmethod
    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        """Run ``command`` in a fresh directory holding ``files``."""

    def run_many(self, jobs: Sequence[Job], limits: Limits | None = None) -> list[ExecResult]:
        """Run jobs concurrently (``workers`` at a time); results in the order of ``jobs``."""
        if not jobs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.workers, len(jobs))) as pool:
            return list(pool.map(lambda job: self.run(job.files, job.command, limits), jobs))

    def close(self) -> None:  # noqa: B027 - optional: backends without warm state hold nothing
        """Release containers or processes."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
