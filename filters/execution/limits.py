"""What a sandboxed job may use, and what came of it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["STATUSES", "ExecResult", "Limits"]

STATUSES = ("passed", "failed", "timeout", "oom", "output_limit", "sandbox_error")


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0  # wall clock; the job is killed (SIGKILL) when it runs out
    memory_mb: int = 256  # memory + swap
    pids: int = 64  # processes and threads: a fork bomb stops here
    cpus: float = 1.0
    output_bytes: int = 1 << 20  # stdout + stderr; beyond this the job is killed (output_limit)
    tail_bytes: int = 2000  # kept of each stream in the result
    workdir_mb: int = 64  # tmpfs for the job's files

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ExecResult:
    status: str
    exit_code: int | None
    duration_ms: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    detail: str = ""
    # harness programs only (programs.graded): asserts of the tests that held, of those evaluated
    assertions_passed: int | None = None
    assertions_total: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def score(self) -> dict[str, Any]:
        """The ``scores.execution`` struct of the sample schema."""
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "duration_ms": round(self.duration_ms, 2),
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
            "assertions_passed": self.assertions_passed,
            "assertions_total": self.assertions_total,
        }


def tail(data: bytes, limit: int) -> str:
    text = data[-limit:].decode("utf-8", errors="replace")
    return text if len(data) <= limit else "…" + text
