"""Trajectories into training rows (pure logic over sample records of kind ``agent``).

- ``solve_rate_difficulty``: difficulty = 1 - solve rate over the task's rollouts in the batch
  (``scores.difficulty``, method ``solve_rate``; the difficulty stage keeps it); every rollout of a
  task that all rollouts solve is dropped as ``too_easy``, of one that none solves as
  ``unsolvable`` (stage ``difficulty``).
- ``training_rows``: each live solved trajectory becomes an ``sft`` row (its conversation up to
  its last assistant turn, tools, steps and outcome kept, so it replays); a task with solved and
  failed live rollouts gives ``preference`` rows: each failed one under the solved one with the
  fewest steps, and a solved one over another that took more steps.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ptfactory.generators.agent.reference import REFERENCE_BACKEND
from ptfactory.storage.schema import sample_id

__all__ = ["STAGE", "is_reference", "solve_rate_difficulty", "training_rows"]

STAGE = "difficulty"


def _live(row: dict[str, Any]) -> bool:
    return not any(d["verdict"] == "drop" for d in row.get("decisions") or [])


def is_reference(row: dict[str, Any]) -> bool:
    return (row.get("provenance") or {}).get("engine") == REFERENCE_BACKEND


def solve_rate_difficulty(
    rows: Sequence[dict[str, Any]], rollouts: Mapping[str, int] | None = None
) -> dict[str, float]:
    """Mark every live row's difficulty and too_easy / unsolvable drops, in place; returns the solve
    rate per task. Rows already dropped (``not_reproducible``) do not count, nor do reference
    episodes: a task the model never solves but its reference does is ``hard`` (kept), not
    ``unsolvable``. ``rollouts``: how many rollouts each sample_id stands for (identical rollouts
    are one sample, but each counts in the rate; default one)."""
    weight = rollouts or {}
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if _live(row):
            by_task[row["outcome"]["task_id"]].append(row)
    rates = {}
    for task, group in by_task.items():
        model = [r for r in group if not is_reference(r)]
        solved = sum(weight.get(r["sample_id"], 1) for r in model if r["outcome"]["solved"])
        total = sum(weight.get(r["sample_id"], 1) for r in model)
        rate = solved / total if total else 0.0
        rates[task] = rate
        referenced = any(r["outcome"]["solved"] for r in group if is_reference(r))
        detail = f"{solved} of {total} rollouts solved the task" + (
            "; its reference solution did" if referenced else ""
        )
        reason = "too_easy" if rate == 1 else "unsolvable" if rate == 0 and not referenced else "in_band"
        for row in group:
            scores = dict(row.get("scores") or {})
            scores["difficulty"] = {"method": "solve_rate", "value": round(1 - rate, 6), "detail": detail}
            row["scores"] = scores
            if reason != "in_band":  # the difficulty stage records the keep of the others
                row["decisions"] = [
                    *(row.get("decisions") or []),
                    {"stage": STAGE, "verdict": "drop", "reason": reason, "detail": detail},
                ]
    return rates


def _until_last_answer(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation up to its last assistant turn (a run that ends when the check passes ends
    on a tool result: training stops at the call that fixed it)."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return messages[: last + 1]


def _prompt_length(messages: list[dict[str, Any]]) -> int:
    return next(i for i, m in enumerate(messages) if m["role"] == "assistant")


def _derived(row: dict[str, Any], kind: str, **fields: Any) -> dict[str, Any]:
    provenance = {**(row.get("provenance") or {}), "parent_id": row["sample_id"]}
    base = {
        k: row.get(k) for k in ("batch", "tools", "steps", "outcome", "scores", "decisions", "provenance")
    }
    return {**base, "kind": kind, "provenance": provenance, **fields}


def training_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``sft`` rows of the live solved trajectories and ``preference`` rows of the live pairs."""
    live = [r for r in rows if _live(r) and any(m["role"] == "assistant" for m in r["messages"])]
    out: list[dict[str, Any]] = []
    for row in live:
        if row["outcome"]["solved"]:
            messages = _until_last_answer(row["messages"])
            sid = sample_id("sft", messages, tools=row["tools"])
            out.append(_derived(row, "sft", sample_id=sid, messages=messages))
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in live:
        by_task[row["outcome"]["task_id"]].append(row)
    for group in by_task.values():
        solved = sorted((r for r in group if r["outcome"]["solved"]), key=lambda r: r["outcome"]["n_steps"])
        if not solved:
            continue
        best = solved[0]
        losers = [r for r in group if not r["outcome"]["solved"]]
        losers += [r for r in solved[1:] if r["outcome"]["n_steps"] > best["outcome"]["n_steps"]]
        for loser in losers:
            out.append(_pair(best, loser))
    return out


def _pair(chosen: dict[str, Any], rejected: dict[str, Any]) -> dict[str, Any]:
    """Both episodes after their shared prompt (system and task); the chosen row's record kept."""
    cut = _prompt_length(chosen["messages"])
    prompt = chosen["messages"][:cut]
    good = _until_last_answer(chosen["messages"])[cut:]
    bad = _until_last_answer(rejected["messages"])[_prompt_length(rejected["messages"]) :]
    sid = sample_id("preference", prompt, chosen=good, rejected=bad, tools=chosen["tools"])
    why = "solved over failed" if not rejected["outcome"]["solved"] else "fewer steps over more"
    pair = _derived(chosen, "preference", sample_id=sid, messages=prompt, chosen=good, rejected=bad)
    pair["decisions"] = [
        *(pair["decisions"] or []),
        {
            "stage": "agent_pairs",
            "verdict": "keep",
            "reason": "solved_over_failed" if why.startswith("solved") else "fewer_steps",
            "detail": json.dumps({"rejected": rejected["sample_id"], "why": why}),
        },
    ]
    return pair
