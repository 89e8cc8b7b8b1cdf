"""``score_difficulty``: which method each live row gets, the student's attempts in one engine call,
then each method's decisions recorded on the rows (the tables are in the package docstring)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ptfactory.engines.base import Completion, Engine, SamplingParams
from ptfactory.filters.difficulty.answers import answer_outcomes, target_answer
from ptfactory.filters.difficulty.code import code_outcomes
from ptfactory.filters.difficulty.config import DifficultyConfig
from ptfactory.filters.difficulty.ifd import ifd_outcomes
from ptfactory.filters.difficulty.rows import Outcome, answer, prompt, reference_answer_of
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.control import InfraGate, infra_gate
from ptfactory.filters.verify import AnswerVerifier
from ptfactory.storage.schema import add_decision, live_rows, set_score

__all__ = ["STAGE", "DifficultyStats", "score_difficulty"]

STAGE = "difficulty"


@dataclass
class DifficultyStats:
    methods: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    values: list[float] = field(default_factory=list)
    ifd_band: tuple[float, float] | None = None  # the band the batch's IFD rows were held to
    sandbox_runs: int = 0  # the student's code attempts run in the sandbox
    sandbox_infra_errors: int = 0  # of those, infrastructure faults (abstained)

    def gate(self, max_share: float) -> InfraGate:
        """The student runs' infrastructure health (the execution stage's gate, for this stage)."""
        return infra_gate(self.sandbox_infra_errors, self.sandbox_runs, max_share)


def _method(row: dict[str, Any], config: DifficultyConfig) -> str:
    """The row's method: ``code`` for code rows (``code_unscored`` without the student's attempts:
    a failing solution is still decided here), ``pass_rate`` for rows with a final answer (``math``
    rows, or any kind set to pass_rate), ``ifd``, ``none``."""
    kind = row["kind"]
    if kind == "code":
        return "code" if config.methods.get("code") == "pass_rate" else "code_unscored"
    method: str = config.methods.get(kind, "none")
    if kind == "sft" and reference_answer_of(row) is not None and "math" in config.methods:
        method = config.methods["math"]
    if method == "pass_rate" and target_answer(row) is None:
        method = "ifd"  # nothing to check the student's answer against
    if method == "ifd" and not answer(row):
        method = "none"
    return method


def _student_answers(
    prompts: list[str], student: Engine, config: DifficultyConfig
) -> dict[str, list[Completion]]:
    """``k`` answers per distinct prompt (rows that share a user turn share the attempts)."""
    distinct = list(dict.fromkeys(prompts))
    params = SamplingParams(n=config.k, temperature=config.temperature, max_tokens=config.max_tokens, seed=0)
    replies = student.chat([[{"role": "user", "content": p}] for p in distinct], params)
    return dict(zip(distinct, replies, strict=True))


def score_difficulty(
    table: pa.Table,
    student: Engine,
    sandbox: Sandbox | None,
    config: DifficultyConfig,
    *,
    verifier: AnswerVerifier | None = None,
    retries: int = 1,
) -> tuple[pa.Table, DifficultyStats]:
    """Every row back with ``scores.difficulty`` and a ``difficulty`` decision; dropped rows untouched.

    ``verifier``: the answer verifier for rows with a final answer (default: one started here, on
    first use, and closed after); ``retries``: runs again of a student attempt the sandbox's
    infrastructure failed (``execution.infra_retries``)."""
    stats = DifficultyStats()
    rows = table.to_pylist()
    live = live_rows(table)
    results: dict[int, Outcome] = {}

    by_method: dict[str, list[int]] = {}
    for i in live:
        row = rows[i]
        given = (row.get("scores") or {}).get("difficulty") or {}
        if given.get("method") == "solve_rate":  # agent rows: 1 - solve rate, set where they were rolled out
            results[i] = Outcome("solve_rate", given["value"], "keep", "in_band", given.get("detail"))
            continue
        if (row.get("provenance") or {}).get("finish_reason") == "length":
            detail = "finish_reason=length: the engine cut the response at max_tokens"
            results[i] = Outcome("none", None, "drop", "truncated", detail)
            continue
        by_method.setdefault(_method(row, config), []).append(i)
    # the student's attempts at answer and code rows in one engine call: one batch, not two in turn
    attempted = [i for method in ("pass_rate", "code") for i in by_method.get(method, [])]
    answers = _student_answers([prompt(rows[i]) for i in attempted], student, config) if attempted else {}
    if by_method.get("pass_rate"):
        owned = verifier is None
        verifier = verifier or AnswerVerifier()
        try:
            results.update(answer_outcomes(rows, by_method["pass_rate"], answers, verifier, config))
        finally:
            if owned:
                verifier.close()
    outcomes, graded = code_outcomes(
        rows,
        by_method.get("code", []),
        by_method.get("code_unscored", []),
        answers,
        sandbox=sandbox,
        config=config,
        retries=retries,
    )
    results.update(outcomes)
    stats.sandbox_runs = sum(a.sandbox_runs for a in graded)
    stats.sandbox_infra_errors = sum(a.infra_errors for a in graded)
    if by_method.get("ifd"):
        results.update(ifd_outcomes(rows, by_method["ifd"], student, config))
        stats.ifd_band = (config.ifd_min, config.ifd_max)
    for i in by_method.get("none", []):
        results[i] = Outcome("none", None, "keep", "not_scored", None)

    scores: list[dict[str, object] | None] = [
        r["scores"]["difficulty"] if r["scores"] else None for r in rows
    ]
    for i, outcome in results.items():
        shown = outcome.score_detail if outcome.score_detail is not None else outcome.detail
        scores[i] = {"method": outcome.method, "value": outcome.value, "detail": shown}
        stats.methods[outcome.method] += 1
        if outcome.verdict == "drop":
            stats.dropped[outcome.reason] += 1
        if outcome.value is not None:
            stats.values.append(outcome.value)
    out = set_score(table, "difficulty", scores)
    merged = add_decision(
        out,
        STAGE,
        [results[i].verdict for i in live],
        [results[i].reason for i in live],
        [results[i].detail for i in live],
        rows=live,
    )
    return merged, stats
