"""Telling the sandbox's faults from the solution's: a known-good control program, run right after.

A run can end in a fault (``timeout``, ``oom``, ``output_limit``, ``sandbox_error``, or ``failed``
with no assertion counts and no exit code of its own: the runner died under it) because the
solution caused it (it looped, slept past the limit, flooded its output, ate its memory, killed
its runner) or because the infrastructure failed (a container killed from outside, a wedged or
overloaded engine). Only the second may excuse the solution, and nothing the solution does must
earn that excuse. So, after a fault, a control program (the same harness, a one-line function, one
assert; it passes in any working sandbox) runs in the same sandbox, under the same limits:

==========================  ================================================================
control                     the fault is
==========================  ================================================================
passes                      the solution's: its status stands (a ``sandbox_error`` becomes
                            ``failed``); never an abstention
fails (any other outcome)   the infrastructure's: the job runs again (``retries`` times, each
                            fault checked the same way); if every try ends so, the job
                            abstains: status ``sandbox_error``, ``Checked.infra`` True
==========================  ================================================================

A sandbox call that raises (no container can start, the engine died) is a ``sandbox_error`` of
every job in it, checked the same way. The control and each retry are distinct jobs (a nonce from
the job's content and the try), so a sandbox that remembers results (``Remembering``) runs them,
and a replay of the same job gets the same answers.

The share of a stage's runs that abstained is the stage's health (:func:`infra_gate`): above
``max_share`` the stage's check fails and nothing of the batch is published.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.limits import ExecResult, Limits
from ptfactory.filters.execution.programs import graded, program

__all__ = ["FAULTS", "Checked", "InfraGate", "control_job", "infra_gate", "is_fault", "run_checked"]

FAULTS = ("timeout", "oom", "output_limit", "sandbox_error")
_CONTROL_SOLUTION = "def ptf_control(x):\n    return x + 1\n"
_CONTROL_TESTS = "def check(candidate):\n    assert candidate(1) == 2\n"


@dataclass(frozen=True)
class Checked:
    """A job's result once its faults were checked against a control."""

    result: ExecResult  # what to record: the solution's outcome, or sandbox_error when infra
    infra: bool = False  # the infrastructure failed on every try: abstain, never a failure
    tries: int = 1  # runs of the job
    controls: tuple[str, ...] = ()  # each control's status, in order
    blamed: bool = False  # a fault the control showed to be the solution's doing


def is_fault(result: ExecResult) -> bool:
    """A result the infrastructure could have caused (``result`` read by ``graded``: a harness
    that reported its counts ran to its end, so its failure is the code's)."""
    if result.status in FAULTS:
        return True
    died = result.exit_code is None or result.exit_code >= 128  # killed by a signal, or no exit at all
    return result.status == "failed" and result.assertions_total is None and died


def _nonce(job: Job, purpose: str, attempt: int) -> str:
    digest = hashlib.sha256(f"{purpose}:{attempt}:{list(job.command)}".encode())
    for name in sorted(job.files):
        content = job.files[name]
        digest.update(name.encode())
        digest.update(content.encode() if isinstance(content, str) else content)
    return digest.hexdigest()[:16]


def control_job(nonce: str) -> Job:
    """The known-good program: the harness, a one-line solution, one assert that holds."""
    text = program(_CONTROL_SOLUTION, _CONTROL_TESTS, "ptf_control") + f"# ptf control {nonce}\n"
    return Job({"program.py": text})


def _control_passed(result: ExecResult) -> bool:
    return result.status == "passed" and (result.assertions_passed, result.assertions_total) == (1, 1)


def _run(sandbox: Sandbox, jobs: Sequence[Job], limits: Limits | None) -> list[ExecResult]:
    if not jobs:
        return []
    try:
        return [graded(r) for r in sandbox.run_many(list(jobs), limits)]
    except Exception as exc:  # the sandbox could not run them at all: its fault, checked like any
        error = f"the sandbox raised {type(exc).__name__}: {str(exc)[:300]}"
        return [ExecResult("sandbox_error", None, 0.0, detail=error) for _ in jobs]


def _blamed(result: ExecResult) -> ExecResult:
    """A fault the control cleared: the solution's. A sandbox_error it caused is its failure."""
    if result.status != "sandbox_error":
        return result
    detail = f"{result.detail}; a control program passed right after: the solution caused it"
    return replace(result, status="failed", detail=detail)


def _abstained(result: ExecResult, control: ExecResult, tries: int) -> ExecResult:
    detail = (
        f"infrastructure fault on {tries} tr{'y' if tries == 1 else 'ies'}: {result.status}"
        f"{f' ({result.detail})' if result.detail else ''}; the control program failed too: "
        f"{control.status}{f' ({control.detail})' if control.detail else ''}"
    )
    return replace(result, status="sandbox_error", detail=detail)


def run_checked(
    sandbox: Sandbox, jobs: Sequence[Job], limits: Limits | None = None, retries: int = 1
) -> list[Checked]:
    """Run ``jobs`` (one ``run_many``), then check each fault with a control (all in one more
    ``run_many``), retry the infrastructure's up to ``retries`` times; one :class:`Checked` per job."""
    results = _run(sandbox, jobs, limits)
    tries = [1] * len(jobs)
    controls: list[list[str]] = [[] for _ in jobs]
    done: dict[int, Checked] = {}
    pending = list(range(len(jobs)))
    while pending:
        faulted = [i for i in pending if is_fault(results[i])]
        for i in pending:
            if i not in faulted:
                done[i] = Checked(results[i], False, tries[i], tuple(controls[i]))
        checks = _run(sandbox, [control_job(_nonce(jobs[i], "control", tries[i])) for i in faulted], limits)
        retry = []
        for i, control in zip(faulted, checks, strict=True):
            controls[i].append(control.status)
            if _control_passed(control):
                done[i] = Checked(_blamed(results[i]), False, tries[i], tuple(controls[i]), blamed=True)
            elif tries[i] <= retries:
                retry.append(i)
            else:
                done[i] = Checked(
                    _abstained(results[i], control, tries[i]), True, tries[i], tuple(controls[i])
                )
        again = [
            Job({**jobs[i].files, ".ptf-try": _nonce(jobs[i], "try", tries[i])}, jobs[i].command)
            for i in retry
        ]
        for i, result in zip(retry, _run(sandbox, again, limits), strict=True):
            results[i] = result
            tries[i] += 1
        pending = retry
    return [done[i] for i in range(len(jobs))]


@dataclass(frozen=True)
class InfraGate:
    """A stage's infrastructure health: ``infra`` of ``runs`` sandbox runs abstained."""

    infra: int
    runs: int
    max_share: float

    @property
    def share(self) -> float:
        return self.infra / self.runs if self.runs else 0.0

    @property
    def passed(self) -> bool:
        return self.share <= self.max_share

    def describe(self) -> str:
        said = f"{self.infra} of {self.runs} sandbox runs ({self.share:.1%}) were infrastructure faults"
        if self.passed:
            return f"{said}; at most {self.max_share:.1%} allowed"
        return (
            f"{said}, above the {self.max_share:.1%} allowed (execution.max_infra_error_share): "
            "nothing from this batch is published; fix the sandbox (`ptf sandbox build`, dockerd) "
            "and materialize the batch again"
        )


def infra_gate(infra: int, runs: int, max_share: float) -> InfraGate:
    return InfraGate(infra, runs, max_share)
