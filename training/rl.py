"""The student's pass rate on verifiable prompts: what ``assemble_rl``'s band reads.

The difficulty stage records a pass rate for code rows and answers with a final number; other
verifiable rows (procedural tasks, constraints) get theirs here: the student answers each prompt
``k`` times through the factory's engine, the factory's verifiers check every answer (the same
path as ``ptf eval``: :func:`ptfactory.training.eval.run.rollouts`), and ``scores.difficulty``
becomes ``{method: "pass_rate", value: 1 - rate, detail: {"solved", "k", "verifier", "model"}}``.
Rows that already carry a pass rate, dropped rows, rows awaiting review and rows no verifier checks
are left as they are.

A prompt is measured once however many rows answer it (keyed by its rl row's id), at most
``rl.max_prompts`` prompts a call (``k`` attempts each: a bounded cost per run); measurements are
returned so the ``rl_dataset`` asset keeps them and a later run measures only new prompts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ptfactory.engines.base import Engine
from ptfactory.filters.execution.base import Sandbox
from ptfactory.storage.assemble import rl_prompt, rl_verifier
from ptfactory.storage.schema import conform, dropped_mask, pending_review, set_score
from ptfactory.training.eval.config import EvalSection
from ptfactory.training.eval.run import rollouts
from ptfactory.training.eval.tasks import EvalTask
from ptfactory.training.rl_config import RLSection

__all__ = ["MEASURED_SCHEMA", "Measured", "RLSection", "measure", "measure_pass_rates"]

# what the rl_dataset asset keeps between runs: one row per (prompt, student, k) measured
MEASURED_SCHEMA = pa.schema(
    [("key", pa.string()), ("student", pa.string()), ("k", pa.int32()), ("solved", pa.int32())]
)


@dataclass
class Measured:
    table: pa.Table  # the rows, a pass rate set where one was measured or known
    new: pa.Table = field(default_factory=MEASURED_SCHEMA.empty_table)  # measured by this call
    measured: int = 0  # prompts the student answered in this call
    reused: int = 0  # prompts whose earlier measurement was applied
    waiting: int = 0  # prompts over max_prompts, left for a later run


def _task(key: str, prompt: list[dict[str, Any]], row: dict[str, Any], kind: str) -> EvalTask:
    code = kind == "code"
    return EvalTask(
        id=key,
        family=kind,
        kind=kind,
        prompt=[{"role": m["role"], "content": m["content"]} for m in prompt],
        source=row["sample_id"],
        reference=row.get("reference"),
        tests=row.get("tests") if code else None,
        entry_point=row.get("entry_point") if code else None,
    )


def _known(known: pa.Table | None, student: str, k: int) -> dict[str, int]:
    if known is None:
        return {}
    return {r["key"]: r["solved"] for r in known.to_pylist() if r["student"] == student and r["k"] == k}


def measure(
    table: pa.Table,
    engine: Callable[[], Engine],
    *,
    section: RLSection,
    student: str,
    known: pa.Table | None = None,
    sandbox: Callable[[], Sandbox] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Measured:
    """A pass rate on every live, verifiable row of ``table`` that lacks one: from ``known`` (earlier
    measurements of the same prompt by the same ``student`` at the same k), else measured, up to
    ``section.max_prompts`` prompts. ``engine`` is called only when something is measured."""
    table = conform(table)
    dropped = dropped_mask(table).to_pylist()
    rows_of: dict[str, list[int]] = {}
    tasks: dict[str, EvalTask] = {}
    for index, row in enumerate(table.to_pylist()):
        difficulty = (row.get("scores") or {}).get("difficulty") or {}
        kind = rl_verifier(row)
        if dropped[index] or kind is None or kind == "agent" or difficulty.get("method") == "pass_rate":
            continue
        if pending_review(row.get("decisions") or []):
            continue  # left out of the version until an expert decides: measured once accepted
        prompt, _, _, key = rl_prompt(row)
        if not prompt:
            continue
        rows_of.setdefault(key, []).append(index)
        tasks.setdefault(key, _task(key, prompt, row, kind))
    k = section.k
    solved = {key: n for key, n in _known(known, student, k).items() if key in tasks}
    todo = [key for key in tasks if key not in solved]
    chosen = todo[: section.max_prompts]
    result = Measured(table, reused=len(solved), waiting=len(todo) - len(chosen))
    if chosen:
        settings = EvalSection(
            rollouts=k, temperature=section.temperature, max_tokens=section.max_tokens, seed=section.seed
        )
        say(f"rl: measuring the student's pass rate on {len(chosen)} prompt(s), {k} attempts each")
        records = rollouts([tasks[key] for key in chosen], engine(), settings, sandbox=sandbox, say=say)
        fresh = dict.fromkeys(chosen, 0)
        for record in records:
            fresh[record["task_id"]] += int(record["success"])
        solved.update(fresh)
        result.measured = len(chosen)
        result.new = pa.table(
            {
                "key": list(fresh),
                "student": [student] * len(fresh),
                "k": [k] * len(fresh),
                "solved": list(fresh.values()),
            },
            schema=MEASURED_SCHEMA,
        )
    rows, values = [], []
    for key, n in solved.items():
        detail = {"solved": n, "k": k, "verifier": tasks[key].kind, "model": student}
        for index in rows_of[key]:
            rows.append(index)
            values.append(
                {"method": "pass_rate", "value": 1.0 - n / k, "detail": json.dumps(detail, sort_keys=True)}
            )
    if rows:
        result.table = set_score(table, "difficulty", values, rows=rows)
    return result


def measure_pass_rates(
    table: pa.Table,
    engine: Engine,
    *,
    k: int = 4,
    temperature: float = 0.7,
    max_tokens: int = 256,
    seed: int = 0,
    sandbox: Callable[[], Sandbox] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> pa.Table:
    """``table`` with a measured pass rate on every live, verifiable row that lacks one (no cap)."""
    section = RLSection(
        k=k, temperature=temperature, max_tokens=max_tokens, seed=seed, max_prompts=table.num_rows
    )
    return measure(
        table, lambda: engine, section=section, student=engine.model_id, sandbox=sandbox, say=say
    ).table
