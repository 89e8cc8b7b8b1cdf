"""A student model's attempts at code problems, graded in the sandbox.

Per problem: how many of the ``k`` attempts passed, how many abstained, plus one passing attempt
and the failing attempt closest to passing (most assertions held), both complete (not cut by
max_tokens). Those two are what a pass-over-fail preference pair needs (``annotators/pairs.py``):
the row's own solution against a student attempt that went the other way.

An attempt abstains, and counts neither as solved nor as failed, when the infrastructure failed
it: the sandbox, by a known-good control program failing the same way on every try
(:mod:`ptfactory.filters.execution.control`), or the engine (a request that failed after its
retries has no text to judge). A fault the solution causes (it kills its runner, sleeps or loops
past the limit, runs out of memory, floods its output) is its failure: nothing earns an
abstention by crashing the sandbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ptfactory.engines.base import Completion
from ptfactory.errors import SandboxError
from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.control import Checked, run_checked
from ptfactory.filters.execution.programs import extract_solution, program

__all__ = ["Attempt", "Attempts", "Problem", "grade_attempts"]

_FAILED = ("failed", "timeout", "oom", "output_limit")


@dataclass(frozen=True)
class Problem:
    prompt: str  # the user turn the student answered
    tests: str
    entry_point: str


@dataclass(frozen=True)
class Attempt:
    text: str  # the student's reply, as written
    status: str  # sandbox_error: an infrastructure fault (abstained); "engine_error": no reply
    assertions_passed: int | None
    assertions_total: int | None
    finish_reason: str
    abstained: bool = False  # the infrastructure failed it: neither solved nor failed

    @property
    def held(self) -> float:
        """Share of assertions that held; 0 where the run reported none."""
        return (self.assertions_passed or 0) / self.assertions_total if self.assertions_total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Attempts:
    solved: int
    k: int  # attempts made, abstentions included
    passing: Attempt | None
    failing: Attempt | None
    abstained: int = 0  # attempts the infrastructure failed (sandbox or engine)
    engine_errors: int = 0  # of those, requests the engine failed (never run in the sandbox)

    @property
    def sandbox_runs(self) -> int:
        return self.k - self.engine_errors

    @property
    def infra_errors(self) -> int:
        """Runs the sandbox's infrastructure failed (a control program failed too, every try)."""
        return self.abstained - self.engine_errors

    @property
    def graded(self) -> int:
        """Attempts that count: solved or failed by the student's own doing."""
        return self.k - self.abstained

    @property
    def clean_failure(self) -> bool:
        """Every attempt graded, none solved: what ``hard`` needs."""
        return self.k > 0 and self.abstained == 0 and self.solved == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "solved": self.solved,
            "k": self.k,
            "abstained": self.abstained,
            "passing": self.passing.to_dict() if self.passing else None,
            "failing": self.failing.to_dict() if self.failing else None,
        }


def _attempt(completion: Completion, checked: Checked | None) -> Attempt:
    if checked is None:  # the engine failed the request: there is no reply to run
        return Attempt(completion.text, "engine_error", None, None, completion.finish_reason, abstained=True)
    result = checked.result
    return Attempt(
        completion.text,
        result.status,
        result.assertions_passed,
        result.assertions_total,
        completion.finish_reason,
        abstained=checked.infra,
    )


def grade_attempts(
    problems: Sequence[Problem],
    answers: Sequence[Sequence[Completion]],
    sandbox: Sandbox | None,
    retries: int = 1,
) -> list[Attempts]:
    """Run every answer against its problem's tests (all in one ``run_many``, faults checked with a
    control program and infrastructure faults retried ``retries`` times); one result per problem."""
    jobs: list[Job] = []
    for problem, replies in zip(problems, answers, strict=True):
        for reply in replies:
            if reply.failed:
                continue
            solution = extract_solution(problem.prompt, reply.text, problem.entry_point)
            jobs.append(Job({"program.py": program(solution, problem.tests, problem.entry_point)}))
    if jobs and sandbox is None:
        raise SandboxError("pass_rate on code rows needs a sandbox: set sandbox.backend in factory.yaml")
    checked = iter(run_checked(sandbox, jobs, retries=retries) if jobs and sandbox else [])
    out = []
    for replies in answers:
        graded_replies = [_attempt(c, None if c.failed else next(checked)) for c in replies]
        passing = [a for a in graded_replies if a.status == "passed" and a.finish_reason != "length"]
        # an empty reply teaches a preference pair nothing; a failure with most asserts held the most
        # an abstention is the infrastructure's failure, not the attempt's; a cut text is never trained on
        failing = [
            a
            for a in graded_replies
            if a.status in _FAILED and not a.abstained and a.text.strip() and a.finish_reason != "length"
        ]
        out.append(
            Attempts(
                solved=sum(1 for a in graded_replies if a.status == "passed"),
                k=len(replies),
                passing=passing[0] if passing else None,
                failing=max(failing, key=lambda a: a.held) if failing else None,
                abstained=sum(1 for a in graded_replies if a.abstained),
                engine_errors=sum(1 for c in replies if c.failed),
            )
        )
    return out
