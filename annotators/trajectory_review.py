"""What an expert's review of an agent trajectory becomes: step labels, and preference pairs on a prefix.

The expert marks the first wrong step of a trajectory (Label Studio's ``agent`` queue). That gives
a label per step up to it: every earlier step ``ok``, that one ``first_error`` (a trajectory marked
with no wrong step: every step ``ok``), in the row's ``step_labels`` (step index, label,
annotator): process supervision, where the outcome alone says only solved or not (Lightman et al.,
2023, "Let's Verify Step by Step").

A wrong step is also where a better action existed. When another rollout of the same task was
solved and took the same actions up to that step (the same calls, in order) but a different one
there, the two differ only in that action: a preference pair over the shared prefix (chosen: the
solved rollout's action, rejected: the wrong one). Without such a rollout no pair is made: nothing
vouches that another action was better.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.pairs import preference_row

__all__ = ["NO_WRONG_STEP", "prefix_pairs", "prefix_sources", "step_labels"]

NO_WRONG_STEP = -1  # Label.first_error when the expert found every step right


def step_labels(n_steps: int, first_error: int, annotator: str) -> list[dict[str, Any]]:
    """``ok`` for each step before the first wrong one, ``first_error`` for it (all ``ok`` when
    ``first_error`` is :data:`NO_WRONG_STEP`)."""
    if first_error >= n_steps:
        return []  # not one of this trajectory's steps (its steps changed since the task was pushed)
    last = n_steps if first_error == NO_WRONG_STEP else first_error + 1
    return [
        {"step": i, "label": "first_error" if i == first_error else "ok", "annotator": annotator}
        for i in range(last)
    ]


def _first_error(row: dict[str, Any]) -> int | None:
    for label in row.get("step_labels") or []:
        if label["label"] == "first_error":
            return int(label["step"])
    return None


def _calls(row: dict[str, Any]) -> list[str]:
    """Each step's action: its kind, tool and arguments (what the policy chose, not what it got)."""
    return [
        json.dumps([s.get("kind"), s.get("name"), s.get("arguments")], sort_keys=True)
        for s in row.get("steps") or []
    ]


def _assistant_at(messages: list[dict[str, Any]], step: int) -> int | None:
    """The index of the assistant message that made step ``step`` (one assistant turn a step)."""
    seen = -1
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            seen += 1
            if seen == step:
                return index
    return None


def _solved(row: dict[str, Any]) -> bool:
    return bool((row.get("outcome") or {}).get("solved"))


def prefix_pairs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One pair per reviewed trajectory whose first wrong step a solved rollout of its task did
    differently after the same actions up to it."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        task = (row.get("outcome") or {}).get("task_id")
        if task and row.get("steps"):
            by_task[task].append(row)
    pairs = []
    for members in by_task.values():
        solved = [r for r in sorted(members, key=lambda r: r["sample_id"]) if _solved(r)]
        for row in members:
            wrong = _first_error(row)
            if wrong is None or wrong < 0:
                continue
            pair = _pair(row, wrong, solved)
            if pair is not None:
                pairs.append(pair)
    return pairs


def _pair(row: dict[str, Any], wrong: int, solved: list[dict[str, Any]]) -> dict[str, Any] | None:
    calls = _calls(row)
    if wrong >= len(calls):
        return None
    for other in solved:
        theirs = _calls(other)
        if other is row or len(theirs) <= wrong or theirs[:wrong] != calls[:wrong]:
            continue
        if theirs[wrong] == calls[wrong]:
            continue  # the same action: the solved rollout does not say another was better
        at, at_other = _assistant_at(row["messages"], wrong), _assistant_at(other["messages"], wrong)
        if at is None or at_other is None:
            continue
        detail = json.dumps(
            {"chosen": other["sample_id"], "rejected": row["sample_id"], "step": wrong}, sort_keys=True
        )
        decision = {"stage": "review", "verdict": "accept", "reason": "step_prefix_pair", "detail": detail}
        source = {**row, "messages": row["messages"][: at + 1]}
        pair = preference_row(
            source,
            [other["messages"][at_other]],
            [row["messages"][at]],
            [decision],
            method="step_prefix_pair",
        )
        pair.update(steps=None, outcome=None, step_labels=None, annotation=None)
        return pair
    return None


def prefix_sources(table: pa.Table) -> np.ndarray[Any, Any]:
    """The rows :func:`prefix_pairs` needs, as a mask: every trajectory (a task id and steps) of a
    task that has both a step labelled ``first_error`` and a solved rollout. Given only these it
    makes the same pairs in the same order (whole tasks are kept, so they come in the same order),
    and a batch without reviewed trajectories is not turned into dicts at all."""
    n = table.num_rows
    outcome = table.column("outcome")
    task = pc.struct_field(outcome, "task_id")
    steps = pc.fill_null(pc.list_value_length(table.column("steps")), 0).to_numpy(zero_copy_only=False)
    member = np.asarray(pc.fill_null(pc.not_equal(task, ""), False).to_numpy(zero_copy_only=False), bool)
    member &= steps > 0
    labels = table.column("step_labels").combine_chunks()
    flat = pc.list_flatten(labels)
    wrong = np.zeros(n, dtype=bool)
    if len(flat):
        hit = pc.fill_null(pc.equal(flat.field("label"), "first_error"), False).to_numpy(zero_copy_only=False)
        wrong[pc.list_parent_indices(labels).to_numpy(zero_copy_only=False)[hit]] = True
    solved = pc.fill_null(pc.struct_field(outcome, "solved"), False).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(member)
    if not len(rows):
        return member
    tasks = task.take(pa.array(rows, pa.int64()))
    array = tasks.combine_chunks() if isinstance(tasks, pa.ChunkedArray) else tasks
    codes = pc.dictionary_encode(array).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    both = np.zeros(int(codes.max()) + 1, dtype=bool)
    with_wrong, with_solved = both.copy(), both.copy()
    with_wrong[codes[wrong[rows]]] = True
    with_solved[codes[np.asarray(solved, bool)[rows]]] = True
    kept = np.zeros(n, dtype=bool)
    kept[rows[(with_wrong & with_solved)[codes]]] = True
    return kept
