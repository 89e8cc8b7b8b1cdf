"""Execution validation: each code sample's solution runs against its tests in the sandbox, and the
result (status, and the share of the tests' assertions that held) is recorded on the row.

A failing row is not dropped here: whether it is a wrong answer to a problem something else
solves, or a problem nothing solves (``unsolvable``), is decided by the difficulty stage, which
also has the student's attempts. Either way it never reaches SFT; it stays in the table for the
execution judge and for pass-over-fail preference pairs.

A fault (timeout, OOM, output flood, a sandbox error, a runner killed under the job) is checked
with a known-good control program in the same sandbox (:mod:`ptfactory.filters.execution.control`):
the solution's fault is recorded as its status (a ``sandbox_error`` it caused becomes ``failed``);
an infrastructure fault is retried (``execution.infra_retries``), then recorded as
``sandbox_error``: an abstention, never the solution's failure. When more than
``execution.max_infra_error_share`` of a batch's runs end so, the sandbox cannot be trusted with
it: every live row of the batch is dropped (``sandbox_unreliable``), so nothing of it is
published, and :attr:`ValidationStats.gate` (the asset check's figure) fails.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from ptfactory.errors import UserInputError
from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.control import InfraGate, infra_gate, run_checked
from ptfactory.filters.execution.limits import ExecResult, Limits
from ptfactory.filters.execution.programs import extract_solution, program
from ptfactory.section import Section
from ptfactory.storage.schema import add_decision, dropped_mask, prompt_of, response_of, set_score

__all__ = ["ExecutionConfig", "ValidationStats", "validate_parquet", "validate_samples"]

STAGE = "execute"
UNRELIABLE = "sandbox_unreliable"


class ExecutionConfig(Section):
    """The ``execution`` section of factory.yaml: how the execution stage treats sandbox faults
    (the sandbox's own limits are the ``sandbox`` section)."""

    max_infra_error_share: float = Field(
        0.1,
        ge=0,
        le=1,
        description="largest share of a batch's sandbox runs that may end in an infrastructure "
        "fault (a control program failed too); above it the batch's check fails and nothing of "
        "it is published",
    )
    infra_retries: int = Field(
        1, ge=0, le=5, description="runs again of a job the infrastructure failed, before it abstains"
    )


@dataclass
class ValidationStats:
    statuses: Counter[str] = field(default_factory=Counter)
    durations_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    not_code: int = 0
    assertions_passed: int = 0  # over the runs whose harness reported its counts
    assertions_total: int = 0
    infra_errors: int = 0  # runs that abstained: the control failed too, on every try
    solution_faults: int = 0  # faults a passing control showed to be the solution's
    retries: int = 0  # runs again after an infrastructure fault
    max_infra_error_share: float = 0.1

    @property
    def validations(self) -> int:
        return sum(self.statuses.values())

    @property
    def gate(self) -> InfraGate:
        """The batch's infrastructure health: what the execution asset's check reports."""
        return infra_gate(self.infra_errors, self.validations, self.max_infra_error_share)

    @property
    def per_second(self) -> float:
        return self.validations / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.durations_ms, q)) if self.durations_ms else 0.0


def _run(
    sandbox: Sandbox, programs: list[str], limits: Limits | None, stats: ValidationStats, retries: int
) -> list[ExecResult]:
    started = time.perf_counter()
    checked = run_checked(sandbox, [Job({"program.py": text}) for text in programs], limits, retries)
    stats.seconds += time.perf_counter() - started
    results = [c.result for c in checked]
    stats.infra_errors += sum(c.infra for c in checked)
    stats.solution_faults += sum(c.blamed for c in checked)
    stats.retries += sum(c.tries - 1 for c in checked)
    for result in results:
        stats.statuses[result.status] += 1
        stats.durations_ms.append(result.duration_ms)
        stats.assertions_passed += result.assertions_passed or 0
        stats.assertions_total += result.assertions_total or 0
    return results


def validate_samples(
    table: pa.Table, sandbox: Sandbox, limits: Limits | None = None, config: ExecutionConfig | None = None
) -> tuple[pa.Table, ValidationStats]:
    """Every row back: code rows with ``scores.execution`` and a decision naming the outcome
    (``tests_passed``, ``execution_failed``, ``execution_timeout``, ``execution_sandbox_error`` for
    an infrastructure fault...; all ``keep``: the difficulty stage drops the failures), other rows
    with a ``not_code`` note; rows dropped upstream untouched. When the batch's infrastructure
    faults pass ``config.max_infra_error_share`` (``stats.gate`` fails), every live row is dropped
    instead (``sandbox_unreliable``)."""
    config = config or ExecutionConfig()
    stats = ValidationStats(max_infra_error_share=config.max_infra_error_share)
    rows = table.to_pylist()
    dropped = dropped_mask(table).to_pylist()
    code_rows = [i for i, r in enumerate(rows) if r["kind"] == "code" and not dropped[i]]
    programs = []
    for i in code_rows:
        row = rows[i]
        prompt = prompt_of(row["messages"], required=True)
        solution = extract_solution(prompt, response_of(row["messages"]), row["entry_point"])
        programs.append(program(solution, row["tests"], row["entry_point"]))
    results = _run(sandbox, programs, limits, stats, config.infra_retries)

    scores: list[dict[str, object] | None] = [r["scores"]["execution"] if r["scores"] else None for r in rows]
    live = [i for i in range(len(rows)) if not dropped[i]]
    reasons = {i: "not_code" for i in live}
    details: dict[int, str | None] = {i: None for i in live}
    for i, result in zip(code_rows, results, strict=True):
        scores[i] = result.score()
        reasons[i] = "tests_passed" if result.passed else f"execution_{result.status}"
        counted = (
            f"{result.assertions_passed}/{result.assertions_total} assertions held"
            if result.assertions_total
            else ""
        )
        details[i] = "; ".join(part for part in (counted, result.detail) if part) or None
    stats.not_code = sum(1 for i in live if reasons[i] == "not_code")
    out = set_score(table, "execution", scores)
    gate = stats.gate
    if not gate.passed:  # the sandbox cannot be trusted with this batch: none of it goes on
        said = gate.describe()
        verdicts = ["drop"] * len(live)
        said_reasons = [UNRELIABLE] * len(live)
        said_details: list[str | None] = [f"{said}; this row: {reasons[i]}" for i in live]
    else:
        verdicts, said_reasons = ["keep"] * len(live), [reasons[i] for i in live]
        said_details = [details[i] for i in live]
    merged = add_decision(out, STAGE, verdicts, said_reasons, said_details, rows=live)
    return merged, stats


def validate_parquet(
    source: Path,
    out: Path,
    sandbox: Sandbox,
    limits: Limits | None = None,
    config: ExecutionConfig | None = None,
) -> ValidationStats:
    """``ptf validate``: run ``solution`` then ``tests`` (then ``check(entry_point)`` when the file has
    an ``entry_point`` column) for every row; write every input column plus ``exec_status``,
    ``exec_exit_code`` and ``exec_duration_ms``."""
    try:
        table = pq.read_table(source)
    except (OSError, pa.ArrowException) as exc:
        raise UserInputError(f"{source}: not a readable Parquet file ({exc})") from None
    for column in ("solution", "tests"):
        if column not in table.column_names:
            raise UserInputError(
                f"{source} has no column {column!r}; columns: {', '.join(table.column_names)}"
            )
    solutions = table.column("solution").to_pylist()
    tests = table.column("tests").to_pylist()
    entry = (
        table.column("entry_point").to_pylist()
        if "entry_point" in table.column_names
        else [None] * len(tests)
    )
    config = config or ExecutionConfig()
    stats = ValidationStats(max_infra_error_share=config.max_infra_error_share)
    results = _run(
        sandbox,
        [program(s or "", t or "", e) for s, t, e in zip(solutions, tests, entry, strict=True)],
        limits,
        stats,
        config.infra_retries,
    )
    table = table.append_column("exec_status", pa.array([r.status for r in results], pa.string()))
    table = table.append_column("exec_exit_code", pa.array([r.exit_code for r in results], pa.int32()))
    table = table.append_column(
        "exec_duration_ms", pa.array([round(r.duration_ms, 2) for r in results], pa.float64())
    )
    for name in ("assertions_passed", "assertions_total"):
        table = table.append_column(f"exec_{name}", pa.array([getattr(r, name) for r in results], pa.int32()))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".tmp-{os.getpid()}-{out.name}")
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return stats
