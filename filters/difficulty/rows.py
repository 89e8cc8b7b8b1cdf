"""What each difficulty method reads of a row, and the :class:`Outcome` it decides."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from ptfactory.storage.schema import prompt_of, response_of

__all__ = ["Outcome", "answer", "problem_key", "prompt", "reference_answer_of", "status"]


class Outcome(NamedTuple):
    method: str
    value: float | None
    verdict: str
    reason: str
    detail: str | None  # the decision's: for a reader
    score_detail: str | None = None  # scores.difficulty.detail, when it differs (JSON attempts)


def prompt(row: dict[str, Any]) -> str:
    return prompt_of(row["messages"], required=True)


def answer(row: dict[str, Any]) -> str:
    return response_of(row["messages"])


def status(row: dict[str, Any]) -> str:
    """What the execution stage recorded for the row's own solution ("not_run" if nothing)."""
    execution = (row.get("scores") or {}).get("execution") or {}
    return str(execution.get("status") or "not_run")


def reference_answer_of(row: dict[str, Any]) -> str | None:
    """The final answer the row's reference carries (not a procedural task's: its own scorer)."""
    reference = row.get("reference") or {}
    if reference.get("family"):
        return None
    found = reference.get("answer")
    return str(found) if found else None


def problem_key(row: dict[str, Any]) -> str:
    """Answers to one instruction share its id as parent (a code prompt is templated, so the
    reference and a sampled answer can differ in the user turn)."""
    parent = (row.get("provenance") or {}).get("parent_id")
    return json.dumps([row["batch"], parent] if parent else [row["batch"], prompt(row)])
