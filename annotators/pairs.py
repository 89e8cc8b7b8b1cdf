"""Preference pairs the machines can vouch for, without a human: for one prompt, the answer that
passed its tests over one that failed them. (Pairs from the judges' scores are preference
candidates, compared in both orders and routed like any row: annotators/judges/pairwise.py. Expert
A/B choices and corrections make pairs in curation.)

Pass over fail comes from two places: two candidates of one prompt (a reference that passed, a
sampled answer that failed), and the student's attempts the difficulty stage kept
(``scores.difficulty.detail``: one passing and one failing attempt, filters/execution/attempts.py):
the row's own passing solution over a failing attempt, or else a passing attempt over the row's
failing solution. A truncated response (cut at max_tokens) is on neither side, and a row a verifier
failed (``scores.verifiers``: a fail is final) is never the chosen side."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.storage.schema import dropped_mask, sample_id

__all__ = ["auto_pairs", "pair_sources", "preference_row"]

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


def _failed(row: dict[str, Any]) -> bool:
    """A verifier failed the row: it is never a ``chosen`` answer."""
    return any(v["verdict"] == "fail" for v in (row["scores"] or {}).get("verifiers") or [])


def _chosen_ok(row: dict[str, Any]) -> bool:
    return _status(row) == "passed" and not _dropped(row) and not _failed(row)


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
        if failing and _chosen_ok(row):
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
    passed = [r for r in members if _chosen_ok(r)]
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


def _flag(values: Any) -> np.ndarray[Any, Any]:
    flags: np.ndarray[Any, Any] = np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), bool)
    return flags


def _members(table: pa.Table) -> np.ndarray[Any, Any]:
    """The rows :func:`auto_pairs` groups, from the Arrow columns: code rows that end in an
    assistant turn and that no stage found unusable (whether that turn is blank is left to it)."""
    messages = table.column("messages").combine_chunks()
    length = pc.fill_null(pc.list_value_length(messages), 0).to_numpy(zero_copy_only=False)
    last_role = np.zeros(table.num_rows, dtype=bool)
    flat = pc.list_flatten(messages)
    if len(flat):
        parents = pc.list_parent_indices(messages).to_numpy(zero_copy_only=False)
        last = np.append(parents[1:] != parents[:-1], True)  # each row's last turn
        last_role[parents[last]] = _flag(pc.equal(flat.field("role").filter(pa.array(last)), "assistant"))
    last_role &= length >= 2
    decisions = table.column("decisions").combine_chunks()
    unusable = np.zeros(table.num_rows, dtype=bool)
    flat = pc.list_flatten(decisions)
    if len(flat):
        hit = _flag(pc.is_in(flat.field("reason"), value_set=pa.array(list(_UNUSABLE))))
        unusable[pc.list_parent_indices(decisions).to_numpy(zero_copy_only=False)[hit]] = True
    return _flag(pc.equal(table.column("kind"), "code")) & last_role & ~unusable


def _verifier_failed(table: pa.Table) -> np.ndarray[Any, Any]:
    """Per row: a verifier failed it (``scores.verifiers`` holds a fail)."""
    out = np.zeros(table.num_rows, dtype=bool)
    verifiers = pc.struct_field(table.column("scores"), "verifiers")
    verifiers = verifiers.combine_chunks() if isinstance(verifiers, pa.ChunkedArray) else verifiers
    flat = pc.list_flatten(verifiers)
    if len(flat):
        parents = pc.list_parent_indices(verifiers).to_numpy(zero_copy_only=False)
        out[parents[_flag(pc.equal(flat.field("verdict"), "fail"))]] = True
    return out


def _codes(values: Any) -> np.ndarray[Any, Any]:
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    codes: np.ndarray[Any, Any] = pc.dictionary_encode(array).indices.fill_null(-1).to_numpy(False)
    return codes.astype(np.int64)


def pair_sources(table: pa.Table) -> np.ndarray[Any, Any]:
    """The rows :func:`auto_pairs` needs, as a mask: given only these (in order) it makes the same
    pairs, in the same order, as given every row, so a large batch is not turned into dicts.

    Kept: every member of a group (an instruction's answers, keyed by batch and parent id) that
    could make a pair: one with a passing row no stage dropped and a failing one, or with a row
    whose kept student attempts could pair with it (its difficulty detail names a failing attempt
    and it passed, or a passing attempt and it failed). Whole groups are kept so the groups come
    in the same order. Members with no parent id are grouped by their prompt, which only Python
    compares: all of them are kept."""
    members = _members(table)
    if not members.any():
        return members
    scores = table.column("scores")
    status = pc.struct_field(pc.struct_field(scores, "execution"), "status")
    difficulty = pc.struct_field(scores, "difficulty")
    passed = _flag(pc.equal(status, "passed")) & ~dropped_mask(table).to_numpy(zero_copy_only=False)
    passed &= ~_verifier_failed(table)
    failed = _flag(pc.is_in(status, value_set=pa.array(list(_FAILED))))
    detail = pc.struct_field(difficulty, "detail")
    attempts = _flag(pc.equal(pc.struct_field(difficulty, "method"), "pass_rate"))
    student = attempts & (
        (passed & _flag(pc.match_substring(detail, '"failing"')))
        | (failed & _flag(pc.match_substring(detail, '"passing"')))
    )
    parent = pc.struct_field(table.column("provenance"), "parent_id")
    keyed = members & _flag(pc.not_equal(parent, ""))  # a parent id is set (and not empty)
    rows = np.flatnonzero(keyed)
    if not len(rows):
        return members
    taken = pa.array(rows, pa.int64())
    batch, parents = _codes(table.column("batch").take(taken)), _codes(parent.take(taken))
    _, group = np.unique((batch + 1) * (int(parents.max()) + 2) + parents + 1, return_inverse=True)
    group = group.reshape(-1)

    def any_of(flags: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        hit = np.zeros(int(group.max()) + 1, dtype=bool)
        hit[group[flags[rows]]] = True
        return hit

    useful = (any_of(passed) & any_of(failed)) | any_of(student)
    kept: np.ndarray[Any, Any] = members & ~keyed
    kept[rows[useful[group]]] = True
    return kept
