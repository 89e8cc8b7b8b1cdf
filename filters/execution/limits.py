"""What a sandboxed job may use, and what came of it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import Field

from ptfactory.section import Section

__all__ = ["STATUSES", "ExecResult", "Limits", "SandboxConfig"]

STATUSES = ("passed", "failed", "timeout", "oom", "output_limit", "sandbox_error")


class Limits(Section):
    """What one sandboxed job may use."""

    timeout_s: float = Field(
        10.0, gt=0, le=600, description="wall clock; the job is killed (SIGKILL) after it"
    )
    memory_mb: int = Field(256, ge=32, description="memory + swap")
    pids: int = Field(64, ge=8, description="processes and threads: a fork bomb stops here")
    cpus: float = Field(1.0, gt=0, description="CPU share of one job")
    output_bytes: int = Field(
        1 << 20, gt=0, description="stdout + stderr; beyond this the job is killed (output_limit)"
    )
    tail_bytes: int = Field(2000, gt=0, description="kept of each stream in the result")
    workdir_mb: int = Field(64, gt=0, description="tmpfs for the job's files")

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in Limits.model_fields}


class SandboxConfig(Limits):
    """The ``sandbox`` section of factory.yaml: the per-job :class:`Limits` plus the pool's settings.
    A sandbox takes it as its limits (it is one)."""

    backend: Literal["auto", "docker", "bwrap"] = Field(
        "auto",
        description="auto / docker: the Docker sandbox, or an error saying how to start Docker; bwrap: "
        "the bubblewrap sandbox (namespaces + rlimits, no cgroups: weaker), only where chosen",
    )
    workers: int | None = Field(None, gt=0, description="warm containers / concurrent jobs; default: cores")
    jobs_per_container: int = Field(100, gt=0, description="recycle a container after this many jobs")

    def limits(self) -> Limits:
        """The per-job limits alone (what a job's cache key and a remote worker need)."""
        return Limits(**self.to_dict())


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
