"""The panel also scores the rows the difficulty stage dropped (they keep their drop), so each
difficulty reason can be checked against the judges: do the rows it drops score lower than those
it keeps?"""

from __future__ import annotations

from typing import Any

from ptfactory.annotators.judges.panel import judged_rows, means_by_drop_reason
from ptfactory.storage.schema import from_records, sample_id


def _row(i: int, mean: float | None, *drops: tuple[str, str]) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    decisions = [{"stage": "generate", "verdict": "keep", "reason": "sampled", "detail": None}]
    decisions += [
        {"stage": stage, "verdict": "drop", "reason": reason, "detail": None} for stage, reason in drops
    ]
    return {
        "sample_id": sample_id("sft", messages),
        "batch": "b",
        "kind": "sft",
        "messages": messages,
        "scores": {"judge_mean": mean},
        "decisions": decisions,
    }


def test_difficulty_drops_are_judged_and_reported_per_reason() -> None:
    table = from_records(
        [
            _row(0, 8.0),
            _row(1, 6.0),
            _row(2, 3.0, ("difficulty", "too_easy")),
            _row(3, 5.0, ("difficulty", "too_easy")),
            _row(4, 2.0, ("difficulty", "truncated")),
            _row(5, None, ("dedup", "near_duplicate")),  # dropped earlier: not judged, not reported
            _row(6, 1.0, ("dedup", "near_duplicate"), ("difficulty", "too_easy")),
        ]
    )
    assert judged_rows(table) == [0, 1, 2, 3, 4]
    assert means_by_drop_reason(table) == {"kept": (2, 7.0), "too_easy": (2, 4.0), "truncated": (1, 2.0)}


def _vote(judge: str, score: float | None, parsed: bool = True) -> dict[str, Any]:
    return {
        "judge": judge,
        "model": "m",
        "score": score,
        "verdict": "accept",
        "parsed": parsed,
        "method": "pmi",
    }


def test_the_gate_against_the_llm_judges_alone() -> None:
    """``judges=``: each row's mean over those judges' scored, parsed votes; a verifier's vote (in
    the panel mean) and other judges' are left out, and a row none of them scored is not counted."""
    rows = [_row(0, 10.0), _row(1, 1.0, ("difficulty", "execution_failed")), _row(2, 9.0)]
    rows[0]["scores"]["judges"] = [_vote("llm-a", 4.0), _vote("llm-b", 6.0), _vote("execution", 10.0)]
    rows[1]["scores"]["judges"] = [
        _vote("llm-a", 8.0),
        _vote("llm-b", None),
        _vote("llm-b", 2.0, parsed=False),
    ]
    rows[2]["scores"]["judges"] = [_vote("relevance", 9.0)]
    table = from_records(rows)
    assert means_by_drop_reason(table) == {"execution_failed": (1, 1.0), "kept": (2, 9.5)}
    llm = means_by_drop_reason(table, judges=frozenset({"llm-a", "llm-b"}))
    assert llm == {"execution_failed": (1, 8.0), "kept": (2, 5.0)}  # inverted: what the figure is for
