"""Preference pairs the machines can vouch for, without a human: for one prompt, the answer that
passed its tests over one that failed them. (Pairs from the judges' scores are preference
candidates, compared in both orders and routed like any row: annotators/judges/pairwise.py. Expert
A/B choices and corrections make pairs in curation.)

Pass over fail comes from two places: two candidates of one prompt (a reference that passed, a
sampled answer that failed), and the student's attempts the difficulty stage kept
(``scores.difficulty.detail``: one passing and one failing attempt, filters/execution/attempts.py):
the row's own passing solution over a failing attempt, or else a passing attempt over the row's
failing solution. A truncated response (cut at max_tokens) is on neither side."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from ptfactory.storage.schema import sample_id

__all__ = ["auto_pairs", "preference_row"]

_FAILED = ("failed", "timeout", "oom", "output_limit")
_UNUSABLE = (
    "near_duplicate",
    "near_duplicate_published",
    "exact_duplicate",
    "empty_response",
    "engine_error",
    "truncated",
)


def _dropped(row: dict[str, Any]) -> bool:
    return any(d["verdict"] in ("drop", "reject") for d in row["decisions"] or [])


def _unusable(row: dict[str, Any]) -> bool:
    return any(d["reason"] in _UNUSABLE for d in row["decisions"] or [])


def preference_row(
    source: dict[str, Any],
    chosen: list[dict[str, str]],
    rejected: list[dict[str, str]],
    decisions: list[dict[str, Any]],
    method: str | None = None,
) -> dict[str, Any]:
    """A preference row over ``source``'s prompt (all turns but its last); ``source`` is its parent."""
    prompt = source["messages"][:-1]
    provenance = {**(source.get("provenance") or {}), "parent_id": source["sample_id"]}
    if method:
        provenance["method"] = method
    pair = dict(source)
    pair.update(
        kind="preference",
        messages=prompt,
        chosen=chosen,
        rejected=rejected,
        sample_id=sample_id("preference", prompt, chosen=chosen, rejected=rejected),
        tests=None,
        entry_point=None,
        decisions=decisions,
        provenance=provenance,
    )
    return pair


def _pair(chosen: dict[str, Any], rejected: dict[str, Any], reason: str, detail: str) -> dict[str, Any]:
    why = json.dumps({"chosen": chosen["sample_id"], "rejected": rejected["sample_id"], "why": detail})
    pair = preference_row(
        chosen,
        chosen["messages"][-1:],
        rejected["messages"][-1:],
        [{"stage": "pair", "verdict": "keep", "reason": reason, "detail": why}],
        method="auto_pair",
    )
    pair["annotation"] = None
    return pair


def _status(row: dict[str, Any]) -> str | None:
    status: str | None = ((row["scores"] or {}).get("execution") or {}).get("status")
    return status


def _attempts(row: dict[str, Any]) -> dict[str, Any]:
    """The student attempts the difficulty stage kept for a code row ({} where none)."""
    difficulty = (row["scores"] or {}).get("difficulty") or {}
    if difficulty.get("method") != "pass_rate":
        return {}
    try:
        kept = json.loads(difficulty.get("detail") or "")
    except ValueError:
        return {}
    return kept if isinstance(kept, dict) else {}


def _student_pair(members: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The row's passing solution over a failing attempt; else a passing attempt over the row's
    failing solution (the attempt answered the row's own user turn, so the prompt is the same)."""
    for row in members:
        failing = _attempts(row).get("failing")
        if failing and _status(row) == "passed" and not _dropped(row):
            rejected = [{"role": "assistant", "content": failing["text"]}]
            why = f"passed vs a student attempt that {failing['status']}"
            return _student_row(row, row["messages"][-1:], rejected, "execution_pass_vs_student_fail", why)
    for row in members:
        passing = _attempts(row).get("passing")
        if passing and _status(row) in _FAILED:
            chosen = [{"role": "assistant", "content": passing["text"]}]
            why = f"a student attempt that passed vs {_status(row)}"
            pair = _student_row(row, chosen, row["messages"][-1:], "student_pass_vs_execution_fail", why)
            pair["scores"] = None  # the failing row's judges and scores are not the chosen side's
            return pair
    return None


def _student_row(
    row: dict[str, Any],
    chosen: list[dict[str, str]],
    rejected: list[dict[str, str]],
    reason: str,
    why: str,
) -> dict[str, Any]:
    detail = json.dumps({"row": row["sample_id"], "why": why})
    decision = {"stage": "pair", "verdict": "keep", "reason": reason, "detail": detail}
    pair = preference_row(row, chosen, rejected, [decision], method="auto_pair")
    pair["annotation"] = None
    return pair


def _candidate_pair(members: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A candidate that passed (and no stage dropped) over one that failed."""
    passed = [r for r in members if _status(r) == "passed" and not _dropped(r)]
    failed = [r for r in members if _status(r) in _FAILED]
    if not passed or not failed:
        return None
    return _pair(passed[0], failed[0], "execution_pass_vs_fail", f"passed vs {_status(failed[0])}")


def auto_pairs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most one pair per code prompt from its candidates and one from the student's attempts; the
    chosen side is a row no stage dropped, or a student attempt that passed the tests."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        messages = row["messages"] or []
        answered = (
            len(messages) >= 2 and messages[-1]["role"] == "assistant" and messages[-1]["content"].strip()
        )
        if row["kind"] == "code" and answered and not _unusable(row):
            # answers to one instruction share its id as parent (a code prompt is templated, so the
            # reference and a sampled answer can differ in the user turn)
            parent = (row.get("provenance") or {}).get("parent_id")
            key = [row["batch"], parent] if parent else [row["batch"], messages[:-1]]
            groups[json.dumps(key, sort_keys=True)].append(row)
    pairs: list[dict[str, Any]] = []
    for group in groups.values():
        members = sorted(group, key=lambda r: r["sample_id"])
        pairs.extend(p for p in (_candidate_pair(members), _student_pair(members)) if p is not None)
    return pairs
