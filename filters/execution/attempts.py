"""A student model's attempts at code problems, graded in the sandbox.

Per problem: how many of the ``k`` attempts passed, plus one passing attempt and the failing
attempt closest to passing (most assertions held), both complete (not cut by max_tokens). Those two are
what a pass-over-fail preference pair needs (``annotators/pairs.py``): the row's own solution
against a student attempt that went the other way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ptfactory.engines.base import Completion
from ptfactory.errors import SandboxError
from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.limits import ExecResult
from ptfactory.filters.execution.programs import extract_solution, graded, program

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
    status: str
    assertions_passed: int | None
    assertions_total: int | None
    finish_reason: str

    @property
    def held(self) -> float:
        """Share of assertions that held; 0 where the run reported none."""
        return (self.assertions_passed or 0) / self.assertions_total if self.assertions_total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Attempts:
    solved: int
    k: int
    passing: Attempt | None
    failing: Attempt | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "solved": self.solved,
            "k": self.k,
            "passing": self.passing.to_dict() if self.passing else None,
            "failing": self.failing.to_dict() if self.failing else None,
        }


def _attempt(completion: Completion, result: ExecResult) -> Attempt:
    return Attempt(
        completion.text,
        result.status,
        result.assertions_passed,
        result.assertions_total,
        completion.finish_reason,
    )


def grade_attempts(
    problems: Sequence[Problem], answers: Sequence[Sequence[Completion]], sandbox: Sandbox | None
) -> list[Attempts]:
    """Run every answer against its problem's tests (all in one ``run_many``); one result per problem."""
    jobs: list[Job] = []
    for problem, replies in zip(problems, answers, strict=True):
        for reply in replies:
            solution = extract_solution(problem.prompt, reply.text, problem.entry_point)
            jobs.append(Job({"program.py": program(solution, problem.tests, problem.entry_point)}))
    if jobs and sandbox is None:
        raise SandboxError("pass_rate on code rows needs a sandbox: set sandbox.backend in factory.yaml")
    results = [graded(r) for r in sandbox.run_many(jobs)] if jobs and sandbox else []
    out, at = [], 0
    for replies in answers:
        graded_replies = [
            _attempt(c, r) for c, r in zip(replies, results[at : at + len(replies)], strict=True)
        ]
        at += len(replies)
        passing = [a for a in graded_replies if a.status == "passed" and a.finish_reason != "length"]
        # an empty reply teaches a preference pair nothing; a failure with most asserts held the most
        # a sandbox_error is the sandbox's failure, not the attempt's; a cut text is never trained on
        failing = [
            a
            for a in graded_replies
            if a.status in _FAILED and a.text.strip() and a.finish_reason != "length"
        ]
        out.append(
            Attempts(
                solved=sum(1 for a in graded_replies if a.status == "passed"),
                k=len(replies),
                passing=passing[0] if passing else None,
                failing=max(failing, key=lambda a: a.held) if failing else None,
            )
        )
    return out
