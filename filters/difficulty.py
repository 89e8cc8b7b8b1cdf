"""Difficulty: keep the samples the model currently struggles with, and nothing it must not learn.

First, for every live row: a response the engine cut at ``max_tokens`` (``provenance.finish_reason
== "length"``) is dropped as ``truncated``: never trained on, whatever it scores. Then, per kind:

- ``pass_rate`` (code, and answers with a checkable final number): a student model answers
  ``k`` times; code answers run in the sandbox against the tests, math answers compare the
  final number; difficulty = 1 - pass rate. Code rows, by what the execution stage recorded:

  ====================  ==========================  =====================================
  row's own solution    student                     decision
  ====================  ==========================  =====================================
  passed                solved more than max share  drop ``too_easy`` (default: k of k)
  passed                solved none                 keep ``hard``
  passed                in between                  keep ``in_band``
  failed / timeout...   nothing passes (nor another drop ``unsolvable``
                        candidate for the prompt)
  failed / timeout...   something passes            drop ``execution_<status>``: a wrong
                                                    answer to a solvable problem
  sandbox_error         -                           drop ``execution_sandbox_error``
  ====================  ==========================  =====================================

  Failing code rows are dropped here, not at execution, so that this decision can tell the two
  failures apart; they stay in the table for the execution judge and preference pairs. Their
  ``scores.difficulty.detail`` is JSON: ``{solved, k, passing, failing}`` with one passing and one
  failing student attempt (filters/execution/attempts.py), for pass-over-fail pairs.
- ``ifd``: Instruction-Following Difficulty (Li et al., 2024, "From Quantity to Quality"):
  IFD = PPL(response | instruction) / PPL(response), from ``Engine.score``. IFD >= 1 means the
  instruction does not help predict the response (``instruction_unhelpful``); a low IFD means the
  response is easy given the instruction (``too_easy``). IFD is a ratio of perplexities, always
  > 0, and its scale depends on the student model, so the band is the batch's own: below its
  ``ifd_low_quantile`` is ``too_easy``, above its ``ifd_high_quantile`` (or at/above the
  absolute ``ifd_max``) ``instruction_unhelpful``. Quantiles of a handful of rows are noise: a batch
  with fewer than ``ifd_band_min_rows`` scored rows uses the absolute band (``ifd_min``, ``ifd_max``).

  The defaults, measured on the demo batch (demo/seeds, demo/factory.yaml, the bundled SmolLM2 as
  generator and student): 21 scored SFT rows, IFD 0.003-0.71 (median 0.40), none >= 1. The 10th
  percentile drops the two lowest (0.003, 0.006: answers the instruction all but spells out) as
  ``too_easy``; no upper quantile by default, since a high IFD below 1 is what the IFD paper keeps
  (the hardest useful rows); answers under the wrong instruction do reach >= 1 (the test with the
  demo references shuffled). 5 of those 26 live SFT responses were cut at max_tokens (256).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from ptfactory.engines.base import Completion, Engine, SamplingParams
from ptfactory.filters.execution.attempts import Attempts, Problem, grade_attempts
from ptfactory.filters.execution.base import Sandbox
from ptfactory.storage.schema import add_decision, live_rows, prompt_of, response_of, set_score

__all__ = ["DifficultyConfig", "DifficultyStats", "final_number", "ifd_band", "score_difficulty"]

STAGE = "difficulty"
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class DifficultyConfig:
    methods: dict[str, str] = field(
        default_factory=lambda: {"code": "pass_rate", "sft": "ifd", "preference": "none"}
    )
    k: int = 4  # student attempts per row (pass_rate)
    max_pass_rate: float = 0.75  # above this the student finds it easy: too_easy
    temperature: float = 0.8
    max_tokens: int = 384
    ifd_min: float = 0.0  # absolute floor (below: too_easy); 0 = none: IFD is always > 0
    ifd_max: float = 1.0  # at or above: instruction_unhelpful (the instruction does not help)
    ifd_low_quantile: float = 0.1  # the batch's band: below this quantile, too_easy (0 = none)
    ifd_high_quantile: float = 1.0  # above this quantile, instruction_unhelpful (1 = none)
    ifd_band_min_rows: int = 20  # fewer IFD-scored rows in the batch: the absolute band only


@dataclass
class DifficultyStats:
    methods: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    values: list[float] = field(default_factory=list)
    ifd_band: tuple[float, float] | None = None  # the band the batch's IFD rows were held to


class _Outcome(NamedTuple):
    method: str
    value: float | None
    verdict: str
    reason: str
    detail: str | None  # the decision's: for a reader
    score_detail: str | None = None  # scores.difficulty.detail, when it differs (JSON attempts)


def final_number(text: str) -> float | None:
    """The answer a math solution ends with: after GSM8K's ``####`` if present, else the last number."""
    tail = text.rsplit("####", 1)[1] if "####" in text else text
    numbers = _NUMBER.findall(tail)
    if not numbers:
        return None
    try:
        return float(numbers[-1].replace(",", ""))
    except ValueError:
        return None


def _prompt(row: dict[str, Any]) -> str:
    return prompt_of(row["messages"], required=True)


def _answer(row: dict[str, Any]) -> str:
    return response_of(row["messages"])


def _status(row: dict[str, Any]) -> str:
    """What the execution stage recorded for the row's own solution ("not_run" if nothing)."""
    execution = (row.get("scores") or {}).get("execution") or {}
    return str(execution.get("status") or "not_run")


def _problem_key(row: dict[str, Any]) -> str:
    """Answers to one instruction share its id as parent (a code prompt is templated, so the
    reference and a sampled answer can differ in the user turn)."""
    parent = (row.get("provenance") or {}).get("parent_id")
    return json.dumps([row["batch"], parent] if parent else [row["batch"], _prompt(row)])


def score_difficulty(
    table: pa.Table, student: Engine, sandbox: Sandbox | None, config: DifficultyConfig
) -> tuple[pa.Table, DifficultyStats]:
    """Every row back with ``scores.difficulty`` and a ``difficulty`` decision; dropped rows untouched."""
    stats = DifficultyStats()
    rows = table.to_pylist()
    live = live_rows(table)
    results: dict[int, _Outcome] = {}

    by_method: dict[str, list[int]] = {}
    for i in live:
        row = rows[i]
        given = ((row.get("scores") or {}).get("difficulty") or {}) if row.get("scores") else {}
        if given.get("method") == "solve_rate":  # agent rows: 1 - solve rate, set where they were rolled out
            results[i] = _Outcome("solve_rate", given["value"], "keep", "in_band", given.get("detail"))
            continue
        if (row.get("provenance") or {}).get("finish_reason") == "length":
            detail = "finish_reason=length: the engine cut the response at max_tokens"
            results[i] = _Outcome("none", None, "drop", "truncated", detail)
            continue
        method = config.methods.get(str(row["kind"]), "none")
        if row["kind"] == "code" and method == "pass_rate":
            method = "code"
        elif row["kind"] == "code" and _status(row) != "passed":
            method = "code_unscored"  # no student attempts, but its failure is still decided here
        elif method == "pass_rate" and final_number(_answer(row)) is None:
            method = "ifd"  # nothing to check the student's answer against
        if method == "ifd" and not _answer(row):
            method = "none"
        by_method.setdefault(method, []).append(i)
    # the student's attempts at math and code rows in one engine call: one batch, not two in turn
    attempted = [i for method in ("pass_rate", "code") for i in by_method.get(method, [])]
    answers = _student_answers([_prompt(rows[i]) for i in attempted], student, config) if attempted else {}
    if by_method.get("pass_rate"):
        results.update(
            _math_pass_rate(
                [rows[i] for i in by_method["pass_rate"]], by_method["pass_rate"], answers, config
            )
        )
    results.update(
        _code(
            rows,
            by_method.get("code", []),
            by_method.get("code_unscored", []),
            answers,
            sandbox=sandbox,
            config=config,
        )
    )
    if by_method.get("ifd"):
        outcomes, stats.ifd_band = _ifd(
            [rows[i] for i in by_method["ifd"]], by_method["ifd"], student, config
        )
        results.update(outcomes)
    for i in by_method.get("none", []):
        results[i] = _Outcome("none", None, "keep", "not_scored", None)

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


def _student_answers(
    prompts: list[str], student: Engine, config: DifficultyConfig
) -> dict[str, list[Completion]]:
    """``k`` answers per distinct prompt (rows that share a user turn share the attempts)."""
    distinct = list(dict.fromkeys(prompts))
    params = SamplingParams(n=config.k, temperature=config.temperature, max_tokens=config.max_tokens, seed=0)
    replies = student.chat([[{"role": "user", "content": p}] for p in distinct], params)
    return dict(zip(distinct, replies, strict=True))


def _code(
    rows: list[dict[str, Any]],
    scored: list[int],
    unscored: list[int],
    answers: dict[str, list[Completion]],
    *,
    sandbox: Sandbox | None,
    config: DifficultyConfig,
) -> dict[int, _Outcome]:
    """Code rows: the student's attempts at ``scored`` (pass_rate) graded, then every row's decision."""
    attempts: dict[int, Attempts] = {}
    if scored:
        problems = list(
            dict.fromkeys((_prompt(rows[i]), rows[i]["tests"], rows[i]["entry_point"]) for i in scored)
        )
        graded = grade_attempts(
            [Problem(p, str(t), str(e)) for p, t, e in problems],
            [answers[p] for p, _, _ in problems],
            sandbox,
        )
        by_problem = dict(zip(problems, graded, strict=True))
        attempts = {
            i: by_problem[(_prompt(rows[i]), rows[i]["tests"], rows[i]["entry_point"])] for i in scored
        }
    # a problem is solvable when any candidate of the batch passed, or any student attempt at it did
    solvable = {_problem_key(r) for r in rows if r["kind"] == "code" and _status(r) == "passed"}
    solvable |= {_problem_key(rows[i]) for i, a in attempts.items() if a.solved}
    return {
        i: _code_outcome(rows[i], attempts.get(i), _problem_key(rows[i]) in solvable, config)
        for i in [*scored, *unscored]
    }


def _code_outcome(
    row: dict[str, Any], attempts: Attempts | None, solvable: bool, config: DifficultyConfig
) -> _Outcome:
    """The table in the module docstring; ``attempts`` is None where the method is not pass_rate."""
    status = _status(row)
    if attempts is None:
        method, value, said, kept = "none", None, "no student attempts", None
    else:
        method, value = "pass_rate", 1 - attempts.solved / attempts.k
        said = f"student solved {attempts.solved}/{attempts.k}"
        kept = json.dumps(attempts.to_dict(), ensure_ascii=False)
    if status == "passed":
        if attempts is None:
            return _Outcome(method, value, "keep", "not_scored", said)
        if attempts.solved / attempts.k > config.max_pass_rate:
            return _Outcome(method, value, "drop", "too_easy", said, kept)
        if attempts.solved == 0:
            return _Outcome(method, value, "keep", "hard", said + "; its own solution passes", kept)
        return _Outcome(method, value, "keep", "in_band", said, kept)
    if status == "sandbox_error":  # the sandbox failed, not the code: it says nothing of the problem
        return _Outcome(method, value, "drop", "execution_sandbox_error", said, kept)
    if solvable:
        detail = f"{said}; its own solution: {status}, while the problem is solvable"
        return _Outcome(method, value, "drop", f"execution_{status}", detail, kept)
    detail = f"{said}; its own solution: {status}; no other candidate passes"
    return _Outcome(method, value, "drop", "unsolvable", detail, kept)


def _math_pass_rate(
    rows: list[dict[str, Any]],
    indices: list[int],
    answers: dict[str, list[Completion]],
    config: DifficultyConfig,
) -> dict[int, _Outcome]:
    """Answers with a final number: the student's final numbers against the row's."""
    out: dict[int, _Outcome] = {}
    for index, row in zip(indices, rows, strict=True):
        wanted = final_number(_answer(row))
        solved = sum(
            1
            for a in answers[_prompt(row)]
            if (got := final_number(a.text)) is not None
            and wanted is not None
            and math.isclose(got, wanted, rel_tol=1e-6, abs_tol=1e-6)
        )
        rate = solved / config.k
        detail = f"student solved {solved}/{config.k}"
        verdict, reason = ("drop", "too_easy") if rate > config.max_pass_rate else ("keep", "in_band")
        out[index] = _Outcome("pass_rate", 1 - rate, verdict, reason, detail)
    return out


def ifd_band(values: list[float], config: DifficultyConfig) -> tuple[float, float]:
    """[low, high): the absolute band, narrowed to the batch's quantiles when it has enough rows."""
    low, high = config.ifd_min, config.ifd_max
    if len(values) >= config.ifd_band_min_rows:
        q_low, q_high = config.ifd_low_quantile, config.ifd_high_quantile
        low = max(low, float(np.quantile(values, q_low))) if q_low > 0 else low
        # "above q_high": a value equal to the quantile stays; nudged so the band stays half-open
        high = min(high, math.nextafter(float(np.quantile(values, q_high)), math.inf)) if q_high < 1 else high
    return low, high


def _ifd(
    rows: list[dict[str, Any]], indices: list[int], student: Engine, config: DifficultyConfig
) -> tuple[dict[int, _Outcome], tuple[float, float]]:
    answers = [_answer(r) for r in rows]
    conditioned = student.score([[{"role": "user", "content": _prompt(r)}] for r in rows], answers)
    alone = student.score([[] for _ in rows], answers)
    values = {
        index: math.exp(cond.mean_nll - free.mean_nll)
        for index, cond, free in zip(indices, conditioned, alone, strict=True)
        if cond.logprobs
    }
    low, high = ifd_band(list(values.values()), config)
    band = f"band [{low:.3g}, {high:.3g}) over {len(values)} rows"
    out: dict[int, _Outcome] = {}
    for index, cond, free in zip(indices, conditioned, alone, strict=True):
        if index not in values:
            out[index] = _Outcome("ifd", None, "keep", "not_scored", "empty response")
            continue
        ifd = values[index]
        detail = f"IFD {ifd:.3f}: PPL(r|i)={math.exp(cond.mean_nll):.2f} PPL(r)={math.exp(free.mean_nll):.2f}; {band}"
        if ifd >= high:
            out[index] = _Outcome("ifd", ifd, "drop", "instruction_unhelpful", detail)
        elif ifd < low:
            out[index] = _Outcome("ifd", ifd, "drop", "too_easy", detail)
        else:
            out[index] = _Outcome("ifd", ifd, "keep", "in_band", detail)
    return out, (low, high)
