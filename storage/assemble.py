"""Assemble the rows of a dataset version from stage outputs of every batch so far."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.storage.schema import (
    conform,
    dropped_mask,
    from_records,
    pending_review,
    sample_id,
)
from ptfactory.storage.schema.review import budget_exhausted_mask

__all__ = [
    "RL_BAND",
    "Assembled",
    "assemble_preference",
    "assemble_rl",
    "assemble_sft",
    "rl_prompt",
    "rl_verifier",
]

# rl rows the student solves sometimes but not always: pass rate in the open interval (low, high),
# where a group of sampled completions has both rewards and a policy gradient has signal
RL_BAND = (0.0, 1.0)


@dataclass
class Assembled:
    table: pa.Table
    batches: list[str]
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows left out


def _last_role(table: pa.Table) -> pa.Array:
    messages = table.column("messages").combine_chunks()
    lengths = pc.list_value_length(messages)
    last = pc.subtract(lengths, 1)
    offsets = pc.add(messages.offsets[:-1], last)
    roles = pc.list_flatten(messages).field("role")
    return pc.take(roles, offsets)


def assemble_sft(rows: pa.Table) -> Assembled:
    """SFT and code rows (see :func:`_assemble`)."""
    return _assemble(rows, ("sft", "code"))


def assemble_preference(rows: pa.Table) -> Assembled:
    """Preference rows with both a chosen and a rejected answer (see :func:`_assemble`)."""
    return _assemble(rows, ("preference",))


def _assemble(rows: pa.Table, kinds: tuple[str, ...]) -> Assembled:
    """SFT-ready rows: not dropped, ending in an assistant turn, each sample once.

    A sample that appears in several batches (same content, same id) is kept once, from
    the first batch that produced it. Each row has one copy: a waiting row that got a review slot
    from a later batch is decided on the row itself, in the review queue, and the routed copy of a
    sample another batch already queued is dropped (``already_queued``). Rows still awaiting or
    waiting for review, or for a response, are left out and counted, not lost (they stay in their
    stage outputs).
    """
    table = conform(rows)
    table = table.filter(pc.is_in(table.column("kind"), value_set=pa.array(kinds)))
    batches = sorted(set(table.column("batch").to_pylist()))
    skipped: dict[str, int] = {}
    dropped = dropped_mask(table)
    # dropped because a run's budget ran out, not for what they say: a rerun may still publish them
    budget = int(pc.sum(budget_exhausted_mask(table)).as_py() or 0)
    skipped["budget_exhausted"] = budget
    skipped["dropped_upstream"] = int(pc.sum(dropped).as_py() or 0) - budget
    table = table.filter(pc.invert(dropped))
    pending = pa.array([pending_review(t) for t in table.column("decisions").to_pylist()], pa.bool_())
    skipped["awaiting_review"] = int(pc.sum(pending).as_py() or 0)
    table = table.filter(pc.invert(pending))
    if table.num_rows and "preference" in kinds:
        has_answer = pc.and_(
            pc.greater(pc.list_value_length(table.column("chosen")), 0),
            pc.greater(pc.list_value_length(table.column("rejected")), 0),
        )
        has_answer = pc.fill_null(has_answer, False)
        skipped["no_pair"] = table.num_rows - int(pc.sum(has_answer).as_py() or 0)
        table = table.filter(has_answer)
    elif table.num_rows:
        has_answer = pc.equal(_last_role(table), "assistant")
        skipped["no_response"] = table.num_rows - int(pc.sum(has_answer).as_py() or 0)
        table = table.filter(has_answer)
    ids = table.column("sample_id").to_pylist()
    first: dict[str, int] = {}
    for index, sid in enumerate(ids):
        first.setdefault(sid, index)
    skipped["duplicate_across_batches"] = len(ids) - len(first)
    if len(first) != len(ids):
        table = table.take(pa.array(sorted(first.values()), pa.int64()))
    return Assembled(table, batches, {k: v for k, v in skipped.items() if v})


def rl_verifier(row: Mapping[str, Any]) -> str | None:
    """Which verifier checks a row's task: code (tests and an entry point), procedural (a
    reasoning-gym family), answer (a reference answer), constraints; None when nothing can."""
    if row.get("tests") and row.get("entry_point"):
        return "code"
    reference = row.get("reference") or {}
    for key, kind in (("family", "procedural"), ("answer", "answer"), ("constraints", "constraints")):
        if reference.get(key):
            return kind
    return None


def rl_prompt(row: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None, str | None, str]:
    """A row's task as an rl row holds it: the turns before the answer, the tests and entry point
    (code rows only), and the rl row's ``sample_id`` (one per prompt, however often it was answered:
    what the student's measured pass rate is keyed by)."""
    prompt = [dict(m) for m in row["messages"]]
    while prompt and prompt[-1]["role"] == "assistant":
        prompt.pop()
    tests, entry = (row.get("tests"), row.get("entry_point")) if rl_verifier(row) == "code" else (None, None)
    return prompt, tests, entry, sample_id("rl", prompt, tests=tests, entry_point=entry)


def _pass_rate(row: Mapping[str, Any]) -> tuple[float, int | None] | None:
    """The student's pass rate (and k) the difficulty stage recorded: ``scores.difficulty`` with
    method ``pass_rate`` holds 1 - rate, its detail ``{"solved", "k"}``."""
    difficulty = (row.get("scores") or {}).get("difficulty") or {}
    if difficulty.get("method") != "pass_rate" or difficulty.get("value") is None:
        return None
    try:
        k = json.loads(difficulty.get("detail") or "{}").get("k")
    except ValueError:
        k = None
    return 1.0 - float(difficulty["value"]), k


def assemble_rl(rows: pa.Table, band: tuple[float, float] = RL_BAND) -> Assembled:
    """``rl`` rows from the stage outputs: one per verifiable prompt that passed the gates.

    A row qualifies when no stage dropped it and no review is pending; a verifier can check its
    task (:func:`rl_verifier`); a code row's own solution passed its tests (else the tests are
    unproven); its answer, if it has one, was not failed by a verifier; and the student's pass rate
    (``scores.difficulty``, method ``pass_rate``; training/rl.py measures it where the difficulty
    stage did not) lies strictly inside ``band``. The rl row is the prompt (the turns before the
    answer), the ``reference`` or ``tests``/``entry_point``, the pass rate in ``scores.difficulty``
    and a decision (stage ``rl``) whose detail names the verifier, the pass rate, k and the band.
    A prompt answered several times becomes one row (its first copy). Left-out rows are counted
    by reason, not lost (they stay in their stage outputs).
    """
    low, high = band
    table = conform(rows)
    table = table.filter(pc.is_in(table.column("kind"), value_set=pa.array(["sft", "code", "rl"])))
    batches = sorted(set(table.column("batch").to_pylist()))
    skipped: dict[str, int] = {}
    dropped = dropped_mask(table)
    skipped["dropped_upstream"] = int(pc.sum(dropped).as_py() or 0)
    table = table.filter(pc.invert(dropped))
    records: dict[str, dict[str, Any]] = {}
    for row in table.to_pylist():
        reason = _rl_problem(row, low, high)
        if reason is not None:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        record = _rl_record(row, band)
        if record["sample_id"] in records:
            skipped["duplicate_prompt"] = skipped.get("duplicate_prompt", 0) + 1
            continue
        records[record["sample_id"]] = record
    return Assembled(from_records(records.values()), batches, {k: v for k, v in skipped.items() if v})


def _rl_problem(row: Mapping[str, Any], low: float, high: float) -> str | None:
    if pending_review(row.get("decisions") or []):
        return "awaiting_review"
    verifier = rl_verifier(row)
    if verifier is None:
        return "unverifiable"
    scores = row.get("scores") or {}
    answered = row.get("kind") == "code" and len(row["messages"]) > 1
    if verifier == "code" and answered and (scores.get("execution") or {}).get("status") != "passed":
        return "tests_unproven"
    if any(vote.get("final") for vote in scores.get("verifiers") or []):
        return "verifier_failed"
    measured = _pass_rate(row)
    if measured is None:
        return "no_pass_rate"
    rate = measured[0]
    if rate >= high:
        return "too_easy"
    if rate <= low:
        return "too_hard"
    return None


def _rl_record(row: Mapping[str, Any], band: tuple[float, float]) -> dict[str, Any]:
    prompt, tests, entry, rl_id = rl_prompt(row)
    rate, k = _pass_rate(row) or (0.0, None)
    detail = {"verifier": rl_verifier(row), "pass_rate": round(rate, 6), "k": k, "band": list(band)}
    return {
        "sample_id": rl_id,
        "batch": row["batch"],
        "kind": "rl",
        "messages": prompt,
        "tests": tests,
        "entry_point": entry,
        "language": row.get("language"),
        "provenance": row.get("provenance"),
        "scores": {"difficulty": (row.get("scores") or {}).get("difficulty")},
        "reference": row.get("reference"),
        "decisions": [
            *(row.get("decisions") or []),
            {
                "stage": "rl",
                "verdict": "keep",
                "reason": "in_band",
                "detail": json.dumps(detail, sort_keys=True),
            },
        ],
    }
