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
