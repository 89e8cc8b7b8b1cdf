"""Difficulty: keep the samples the model currently struggles with.

Two methods, chosen per kind:

- ``pass_rate`` (code, and answers with a checkable final number): a student model answers
  ``k`` times; code answers run in the sandbox against the tests, math answers compare the
  final number; difficulty = 1 - pass rate. Rows the student always solves are dropped
  (``too_easy``); rows it never solves are kept only if they are solvable (the row's own
  solution passed its tests, or the reference has a number to check), else ``unsolvable``.
- ``ifd``: Instruction-Following Difficulty (Li et al., 2024, "From Quantity to Quality"):
  IFD = PPL(response | instruction) / PPL(response), from ``Engine.score``. IFD >= 1 means the
  instruction does not help predict the response (``instruction_unhelpful``); a low IFD means
  the response is easy given the instruction (``too_easy``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from ptfactory.engines.base import Engine, SamplingParams
from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.programs import extract_solution, program
from ptfactory.storage.schema import add_decision, live_rows, prompt_of, response_of, set_score

__all__ = ["DifficultyConfig", "DifficultyStats", "final_number", "score_difficulty"]

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
    ifd_min: float = 0.0  # below: too_easy
    ifd_max: float = 1.0  # at or above: instruction_unhelpful


@dataclass
class DifficultyStats:
    methods: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    values: list[float] = field(default_factory=list)


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


def _prompt(row: dict[str, object]) -> str:
    messages = row["messages"]
    assert isinstance(messages, list)
    return prompt_of(messages, required=True)


def _answer(row: dict[str, object]) -> str:
    messages = row["messages"]
    assert isinstance(messages, list)
    return response_of(messages)


def score_difficulty(
    table: pa.Table, student: Engine, sandbox: Sandbox | None, config: DifficultyConfig
) -> tuple[pa.Table, DifficultyStats]:
    """Every row back with ``scores.difficulty`` and a ``difficulty`` decision; dropped rows untouched."""
    stats = DifficultyStats()
    rows = table.to_pylist()
    live = live_rows(table)
    results: dict[
        int, tuple[str, float | None, str, str, str | None]
    ] = {}  # method, value, verdict, reason, detail

    by_method: dict[str, list[int]] = {}
    for i in live:
        row = rows[i]
        method = config.methods.get(str(row["kind"]), "none")
        if method == "pass_rate" and row["kind"] != "code" and final_number(_answer(row)) is None:
            method = "ifd"  # nothing to check the student's answer against
        if method == "ifd" and not _answer(row):
            method = "none"
        by_method.setdefault(method, []).append(i)
    if by_method.get("pass_rate"):
        results.update(
            _pass_rate(
                [rows[i] for i in by_method["pass_rate"]], by_method["pass_rate"], student, sandbox, config
            )
        )
    if by_method.get("ifd"):
        results.update(_ifd([rows[i] for i in by_method["ifd"]], by_method["ifd"], student, config))
    for i in by_method.get("none", []):
        results[i] = ("none", None, "keep", "not_scored", None)

    scores: list[dict[str, object] | None] = [
        r["scores"]["difficulty"] if r["scores"] else None for r in rows
    ]
    for i, (method, value, verdict, reason, detail) in results.items():
        scores[i] = {"method": method, "value": value, "detail": detail}
        stats.methods[method] += 1
        if verdict == "drop":
            stats.dropped[reason] += 1
        if value is not None:
            stats.values.append(value)
    out = set_score(table, "difficulty", scores)
    merged = add_decision(
        out,
        STAGE,
        [results[i][2] for i in live],
        [results[i][3] for i in live],
        [results[i][4] for i in live],
        rows=live,
    )
    return merged, stats


def _pass_rate(
    rows: list[dict[str, object]],
    indices: list[int],
    student: Engine,
    sandbox: Sandbox | None,
    config: DifficultyConfig,
) -> dict[int, tuple[str, float | None, str, str, str | None]]:
    params = SamplingParams(n=config.k, temperature=config.temperature, max_tokens=config.max_tokens, seed=0)
    attempts = student.chat([[{"role": "user", "content": _prompt(r)}] for r in rows], params)
    passes: list[int] = []
    code_jobs: list[tuple[int, Job]] = []
    for position, (row, answers) in enumerate(zip(rows, attempts, strict=True)):
        if row["kind"] == "code":
            entry = str(row["entry_point"])
            for answer in answers:
                solution = extract_solution(_prompt(row), answer.text, entry)
                code_jobs.append((position, Job({"program.py": program(solution, str(row["tests"]), entry)})))
            passes.append(0)
        else:
            wanted = final_number(_answer(row))
            passes.append(
                sum(
                    1
                    for a in answers
                    if (got := final_number(a.text)) is not None
                    and wanted is not None
                    and math.isclose(got, wanted, rel_tol=1e-6, abs_tol=1e-6)
                )
            )
    if code_jobs:
        if sandbox is None:
            raise ValueError("pass_rate on code rows needs a sandbox")
        for (position, _), result in zip(
            code_jobs, sandbox.run_many([job for _, job in code_jobs]), strict=True
        ):
            passes[position] += int(result.passed)
    out: dict[int, tuple[str, float | None, str, str, str | None]] = {}
    for index, row, solved in zip(indices, rows, passes, strict=True):
        rate = solved / config.k
        detail = f"student solved {solved}/{config.k}"
        scores = row.get("scores")
        execution = scores.get("execution") if isinstance(scores, dict) else None
        solvable = row["kind"] != "code" or (execution is not None and execution.get("status") == "passed")
        if rate > config.max_pass_rate:
            out[index] = ("pass_rate", 1 - rate, "drop", "too_easy", detail)
        elif solved == 0 and not solvable:
            out[index] = (
                "pass_rate",
                1 - rate,
                "drop",
                "unsolvable",
                detail + "; its own solution fails too",
            )
        else:
            out[index] = ("pass_rate", 1 - rate, "keep", "in_band", detail)
    return out


def _ifd(
    rows: list[dict[str, object]], indices: list[int], student: Engine, config: DifficultyConfig
) -> dict[int, tuple[str, float | None, str, str, str | None]]:
    answers = [_answer(r) for r in rows]
    conditioned = student.score([[{"role": "user", "content": _prompt(r)}] for r in rows], answers)
    alone = student.score([[] for _ in rows], answers)
    out: dict[int, tuple[str, float | None, str, str, str | None]] = {}
    for index, cond, free in zip(indices, conditioned, alone, strict=True):
        if not cond.logprobs:
            out[index] = ("ifd", None, "keep", "not_scored", "empty response")
            continue
        ifd = math.exp(cond.mean_nll - free.mean_nll)
        detail = f"PPL(r|i)={math.exp(cond.mean_nll):.2f} PPL(r)={math.exp(free.mean_nll):.2f}"
        if ifd >= config.ifd_max:
            out[index] = ("ifd", ifd, "drop", "instruction_unhelpful", detail)
        elif ifd < config.ifd_min:
            out[index] = ("ifd", ifd, "drop", "too_easy", detail)
        else:
            out[index] = ("ifd", ifd, "keep", "in_band", detail)
    return out
