"""Pass-over-fail preference pairs from the student attempts the difficulty stage kept, and the
rows that may not be on either side. (The chain from the real sandbox: tests/filters/test_difficulty.py.)"""

import json
from typing import Any

from ptfactory.annotators.pairs import auto_pairs
from ptfactory.storage.schema import from_records, validate_table


def _attempt(text: str, status: str) -> dict[str, Any]:
    return {
        "text": text,
        "status": status,
        "assertions_passed": 3 if status == "passed" else 1,
        "assertions_total": 3,
        "finish_reason": "stop",
    }


def _code(
    answer: str,
    status: str,
    *,
    passing: str | None = None,
    failing: str | None = None,
    dropped: str | None = None,
    parent: str = "p1",
) -> dict[str, Any]:
    kept = {
        "solved": 1 if passing else 0,
        "k": 4,
        "passing": _attempt(passing, "passed") if passing else None,
        "failing": _attempt(failing, "failed") if failing else None,
    }
    decisions = [{"stage": "execute", "verdict": "keep", "reason": f"execution_{status}", "detail": None}]
    if dropped:
        decisions.append({"stage": "difficulty", "verdict": "drop", "reason": dropped, "detail": None})
    return {
        "sample_id": f"{parent}-{answer}",
        "batch": "b1",
        "kind": "code",
        "messages": [{"role": "user", "content": "def f(x):\n"}, {"role": "assistant", "content": answer}],
        "tests": "def check(candidate):\n    assert candidate(1) == 1\n",
        "entry_point": "f",
        "provenance": {"method": "response", "parent_id": parent},
        "scores": {
            "execution": {"status": status},
            "difficulty": {"method": "pass_rate", "value": 1.0, "detail": json.dumps(kept)},
            "judge_mean": 8.0,
        },
        "decisions": decisions,
    }


def _reasons(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted(
        (p["decisions"][-1]["reason"], p["chosen"][0]["content"], p["rejected"][0]["content"])
        for p in auto_pairs(rows)
    )


def test_passing_row_over_a_failing_attempt() -> None:
    row = _code("good", "passed", failing="close")
    (pair,) = auto_pairs([row])
    assert pair["decisions"][-1]["reason"] == "execution_pass_vs_student_fail"
    assert (pair["chosen"][0]["content"], pair["rejected"][0]["content"]) == ("good", "close")
    assert pair["messages"] == row["messages"][:-1]  # the user turn the student answered too
    assert pair["provenance"]["parent_id"] == row["sample_id"]
    assert pair["provenance"]["method"] == "auto_pair"
    validate_table(from_records([pair]))


def test_passing_attempt_over_a_failing_row() -> None:
    row = _code("wrong", "failed", passing="right", dropped="execution_failed")
    (pair,) = auto_pairs([row])
    assert pair["decisions"][-1]["reason"] == "student_pass_vs_execution_fail"
    assert (pair["chosen"][0]["content"], pair["rejected"][0]["content"]) == ("right", "wrong")
    assert pair["scores"] is None  # the failing row's scores are not the chosen side's
    assert json.loads(pair["decisions"][-1]["detail"])["why"] == "a student attempt that passed vs failed"
    validate_table(from_records([pair]))


def test_one_student_pair_per_prompt_beside_the_candidate_pair() -> None:
    rows = [
        _code("good", "passed", failing="close"),
        _code("bad", "failed", failing="close", passing="also good", dropped="execution_failed"),
    ]
    assert _reasons(rows) == [
        ("execution_pass_vs_fail", "good", "bad"),
        ("execution_pass_vs_student_fail", "good", "close"),  # the row's own solution is preferred
    ]


def test_rows_that_are_on_no_side() -> None:
    rejected_by_review = _code("good", "passed", failing="close")
    rejected_by_review["decisions"].append(
        {"stage": "review", "verdict": "reject", "reason": "human_reject", "detail": None}
    )
    truncated = _code("cut off", "failed", passing="right", dropped="truncated", parent="p2")
    unsolvable = _code("nothing", "failed", dropped="unsolvable", parent="p3")
    sandbox_error = _code("who knows", "sandbox_error", passing="right", parent="p4")
    assert auto_pairs([rejected_by_review, truncated, unsolvable, sandbox_error]) == []


def test_difficulty_detail_that_is_not_json_is_ignored() -> None:
    row = _code("good", "passed")
    row["scores"]["difficulty"]["detail"] = "student solved 0/4"  # a row scored before attempts were kept
    assert auto_pairs([row]) == []
