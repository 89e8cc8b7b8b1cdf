"""Rows with a final answer: the student's pass rate, and the row's own answer checked against its
reference, both through the verifier library's one extractor and math-verify (``AnswerVerifier``).

A student attempt counts as solved when the answer verifier passes it against the row's answer
(the row is what the student should reproduce), as failed on a ``fail`` or ``no_answer`` (the
student stated no answer), and abstains on an ``abstain`` (a math-verify timeout or error, an
answer math-verify cannot read) or an engine error: neither solved nor failed. The row's own
answer goes through the same verifier against its ``reference`` (a seed's reference answer,
carried onto every response to that seed): a wrong answer is dropped as ``reference_wrong``,
whatever the students did; so is a row whose own working does not hold ("180 * 40 = 7400":
:mod:`~ptfactory.filters.verify.arithmetic`), a seed's wrong reference included, which checks
against itself. A row whose seed's reference is such a one has nothing to be checked against.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ptfactory.engines.base import Completion
from ptfactory.filters.difficulty.config import DifficultyConfig
from ptfactory.filters.difficulty.rows import Outcome, answer, prompt, reference_answer_of
from ptfactory.filters.verify import AnswerVerifier, Verdict, extract_answer
from ptfactory.filters.verify.arithmetic import slips

__all__ = ["answer_outcomes", "target_answer"]

_WRONG = ("fail", "no_answer")


def target_answer(row: dict[str, Any]) -> str | None:
    """The final answer the row's response states (what a student must reproduce), or None."""
    return extract_answer(answer(row), like=reference_answer_of(row))


def _student_row(question: str, target: str, reply: Completion) -> dict[str, Any]:
    return {
        "kind": "sft",
        "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": reply.text}],
        "reference": {"answer": target, "source": "difficulty"},
        "provenance": {"finish_reason": reply.finish_reason},
    }


def _said(verdict: Verdict) -> str:
    evidence: Mapping[str, Any] = verdict.evidence
    found = f"expected {evidence.get('expected')}, the row says {evidence.get('extracted')}"
    return f"reference check: {verdict.verdict} ({verdict.reason}; {found})"


def answer_outcomes(
    rows: list[dict[str, Any]],
    indices: list[int],
    answers: dict[str, list[Completion]],
    verifier: AnswerVerifier,
    config: DifficultyConfig,
) -> dict[int, Outcome]:
    """Every row of ``indices`` states a final answer (:func:`target_answer`); one verifier call."""
    checks: list[dict[str, Any]] = []
    own_at: dict[int, int] = {}
    tried_at: dict[int, list[int | None]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    for i in indices:
        row = rows[i]
        if reference_answer_of(row) is not None:
            own_at[i] = len(checks)
            checks.append(row)
        target = target_answer(row) or ""
        slots: list[int | None] = []
        for reply in answers[prompt(row)]:
            if reply.failed:  # the engine's failure: no attempt to judge
                slots.append(None)
                continue
            key = (target, reply.text, reply.finish_reason)
            if key not in seen:
                seen[key] = len(checks)
                checks.append(_student_row(prompt(row), target, reply))
            slots.append(seen[key])
        tried_at[i] = slots
    verdicts = verifier.verify_many(checks) if checks else []

    out: dict[int, Outcome] = {}
    for i in indices:
        tried = [verdicts[s] if s is not None else None for s in tried_at[i]]
        solved = sum(1 for v in tried if v is not None and v.verdict == "pass")
        abstained = sum(1 for v in tried if v is None or v.verdict not in ("pass", *_WRONG))
        graded = len(tried) - abstained
        value = 1 - solved / graded if graded else None
        said = f"student solved {solved}/{graded}"
        if abstained:
            reasons = sorted(
                {
                    v.reason if v is not None else "engine_error"
                    for v in tried
                    if v is None or v.verdict == "abstain"
                }
            )
            said += f" ({abstained} of {len(tried)} attempts abstained: {', '.join(reasons)})"
        own = verdicts[own_at[i]] if i in own_at else None
        if own is not None:
            said += f"; {_said(own)}"
        if slipped := slips(answer(rows[i])):
            out[i] = Outcome(
                "pass_rate", value, "drop", "reference_wrong", f"{said}; its working: {'; '.join(slipped)}"
            )
        elif own is not None and own.verdict in _WRONG:
            out[i] = Outcome("pass_rate", value, "drop", "reference_wrong", said)
        elif not graded:
            out[i] = Outcome("pass_rate", value, "keep", "not_scored", said)
        elif solved / graded > config.max_pass_rate:
            out[i] = Outcome("pass_rate", value, "drop", "too_easy", said)
        elif solved:
            out[i] = Outcome("pass_rate", value, "keep", "in_band", said)
        elif own is None or not own.passed:  # nobody reproduces it, and nothing checked it
            why = "no reference to check it against" if own is None else "the reference check abstained"
            out[i] = Outcome(
                "pass_rate",
                value,
                "keep",
                "unverified",
                f"{said}; no student reproduces the row's answer and {why}",
            )
        elif abstained:
            out[i] = Outcome(
                "pass_rate", value, "keep", "in_band", f"{said}; not hard: not every attempt graded"
            )
        else:  # its answer verified right, and every student attempt failed by itself
            out[i] = Outcome("pass_rate", value, "keep", "hard", said)
    return out
