"""Preference pairs the machines can vouch for, without a human: for one prompt, the answer that
passed its tests over one that failed them, and the answer the judges scored higher over one they
scored at least ``margin`` lower. (Expert A/B choices and corrections make pairs in curation.)"""

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


def auto_pairs(rows: list[dict[str, Any]], margin: float = 2.0) -> list[dict[str, Any]]:
    """At most one pair per prompt and rule; the chosen side is a row no stage dropped."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        messages = row["messages"] or []
        answered = (
            len(messages) >= 2 and messages[-1]["role"] == "assistant" and messages[-1]["content"].strip()
        )
        if row["kind"] in ("sft", "code") and answered and not _unusable(row):
            # answers to one instruction share its id as parent (a code prompt is templated, so the
            # reference and a sampled answer can differ in the user turn)
            parent = (row.get("provenance") or {}).get("parent_id")
            key = [row["batch"], row["kind"], parent] if parent else [row["batch"], messages[:-1]]
            groups[json.dumps(key, sort_keys=True)].append(row)
    pairs = []
    for group in groups.values():
        if len(group) < 2:
            continue
        members = sorted(group, key=lambda r: r["sample_id"])
        if members[0]["kind"] == "code":
            status = {
                r["sample_id"]: ((r["scores"] or {}).get("execution") or {}).get("status") for r in members
            }
            passed = [r for r in members if status[r["sample_id"]] == "passed" and not _dropped(r)]
            failed = [r for r in members if status[r["sample_id"]] in _FAILED]
            if passed and failed:
                pairs.append(
                    _pair(
                        passed[0],
                        failed[0],
                        "execution_pass_vs_fail",
                        f"passed vs {status[failed[0]['sample_id']]}",
                    )
                )
            continue
        scored = [r for r in members if (r["scores"] or {}).get("judge_mean") is not None]
        if len(scored) < 2:
            continue
        best = max(
            (r for r in scored if not _dropped(r)), key=lambda r: r["scores"]["judge_mean"], default=None
        )
        worst = min(scored, key=lambda r: r["scores"]["judge_mean"])
        if best is not None and best["scores"]["judge_mean"] - worst["scores"]["judge_mean"] >= margin:
            detail = f"judge mean {best['scores']['judge_mean']:.2f} vs {worst['scores']['judge_mean']:.2f}"
            pairs.append(_pair(best, worst, "judge_margin", detail))
    return pairs
