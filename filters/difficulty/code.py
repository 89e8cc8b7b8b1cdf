"""Code rows: the student's attempts graded in the sandbox, then each row's decision (the table in
the package docstring)."""

from __future__ import annotations

import json
from typing import Any

from ptfactory.engines.base import Completion
from ptfactory.filters.difficulty.config import DifficultyConfig
from ptfactory.filters.difficulty.rows import Outcome, problem_key, prompt, status
from ptfactory.filters.execution.attempts import Attempts, Problem, grade_attempts
from ptfactory.filters.execution.base import Sandbox

__all__ = ["code_outcome", "code_outcomes"]


def code_outcomes(
    rows: list[dict[str, Any]],
    scored: list[int],
    unscored: list[int],
    answers: dict[str, list[Completion]],
    *,
    sandbox: Sandbox | None,
    config: DifficultyConfig,
    retries: int = 1,
) -> tuple[dict[int, Outcome], list[Attempts]]:
    """The student's attempts at ``scored`` (pass_rate) graded, then every row's decision; also the
    graded attempts per problem (the stage counts their infrastructure faults)."""
    attempts: dict[int, Attempts] = {}
    graded: list[Attempts] = []
    if scored:
        problems = list(
            dict.fromkeys((prompt(rows[i]), rows[i]["tests"], rows[i]["entry_point"]) for i in scored)
        )
        graded = grade_attempts(
            [Problem(p, str(t), str(e)) for p, t, e in problems],
            [answers[p] for p, _, _ in problems],
            sandbox,
            retries=retries,
        )
        by_problem = dict(zip(problems, graded, strict=True))
        attempts = {
            i: by_problem[(prompt(rows[i]), rows[i]["tests"], rows[i]["entry_point"])] for i in scored
        }
    # a problem is solvable when any candidate of the batch passed, or any student attempt at it did
    solvable = {problem_key(r) for r in rows if r["kind"] == "code" and status(r) == "passed"}
    solvable |= {problem_key(rows[i]) for i, a in attempts.items() if a.solved}
    outcomes = {
        i: code_outcome(rows[i], attempts.get(i), problem_key(rows[i]) in solvable, config)
        for i in [*scored, *unscored]
    }
    return outcomes, graded


def code_outcome(
    row: dict[str, Any], attempts: Attempts | None, solvable: bool, config: DifficultyConfig
) -> Outcome:
    """``attempts`` is None where the method is not pass_rate."""
    own = status(row)
    if attempts is None:
        method, value, said, kept = "none", None, "no student attempts", None
    else:
        graded = attempts.graded
        method, value = "pass_rate", (1 - attempts.solved / graded) if graded else None
        said = f"student solved {attempts.solved}/{graded}"
        if attempts.abstained:
            said += f" ({attempts.abstained} of {attempts.k} attempts abstained: infrastructure faults)"
        kept = json.dumps(attempts.to_dict(), ensure_ascii=False)
    if own == "passed":
        if attempts is None:
            return Outcome(method, value, "keep", "not_scored", said)
        if not attempts.graded:
            return Outcome(method, value, "keep", "not_scored", said, kept)
        if attempts.solved / attempts.graded > config.max_pass_rate:
            return Outcome(method, value, "drop", "too_easy", said, kept)
        if attempts.clean_failure:  # its own solution passes, and every attempt failed by itself
            return Outcome(method, value, "keep", "hard", said + "; its own solution passes", kept)
        if attempts.solved == 0:
            return Outcome(
                method, value, "keep", "in_band", said + "; not hard: not every attempt graded", kept
            )
        return Outcome(method, value, "keep", "in_band", said, kept)
    if own == "sandbox_error":
        # an infrastructure fault (a control program failed too, on every try): the row's solution is
        # unverified, not wrong; it cannot be trained on, and it says nothing of the problem
        detail = f"{said}; its own solution could not be run: an infrastructure fault"
        return Outcome(method, value, "drop", "execution_sandbox_error", detail, kept)
    if solvable:
        detail = f"{said}; its own solution: {own}, while the problem is solvable"
        return Outcome(method, value, "drop", f"execution_{own}", detail, kept)
    detail = f"{said}; its own solution: {own}; no other candidate passes"
    return Outcome(method, value, "drop", "unsolvable", detail, kept)
