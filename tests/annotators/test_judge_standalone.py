"""`score_table`: which columns it reads, what it adds, and the input it refuses (no models needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

from ptfactory.annotators.judges import Judge, Panel, VerifierSet, Vote
from ptfactory.annotators.judges.standalone import AGGREGATES, ColumnError, detect_columns, score_table
from ptfactory.errors import UserInputError


@dataclass
class Length(Judge):
    """Scores the response's length in words (1-10); abstains on empty responses."""

    @property
    def model(self) -> str:
        return "words"

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        votes = []
        for row in rows:
            words = len(row["messages"][-1]["content"].split())
            score = float(min(10, words)) if words else None
            votes.append(Vote(self.name, self.model, score, "accept" if score else "abstain", confidence=0.5))
        return votes


def _panel() -> Panel:
    """The word-count judge, and the code verifier under the alias ``execution`` (recorded runs only:
    no sandbox)."""
    return Panel([Length("length")], VerifierSet([("execution", "code")]))


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        (["id", "prompt", "response"], ("prompt", "response")),
        (["instruction", "output", "response"], ("instruction", "output")),
        (["instruction", "response"], ("instruction", "response")),
        (["question", "answer"], ("question", "answer")),
        (["input", "output"], ("input", "output")),
        (["prompt", "completion"], ("prompt", "completion")),
    ],
)
def test_columns_are_found_in_the_documented_order(columns: list[str], expected: tuple[str, str]) -> None:
    table = pa.table({c: ["x"] for c in columns})
    found = detect_columns(table)
    assert (found.prompt, found.response) == expected


def test_messages_win_over_text_columns_and_named_columns_win_over_both() -> None:
    table = pa.table(
        {"messages": [[{"role": "user", "content": "a"}]], "q": ["x"], "prompt": ["p"], "response": ["r"]}
    )
    assert detect_columns(table).messages == "messages"
    assert detect_columns(table, "q", "response") == detect_columns(table, "q")  # the other side found
    assert (detect_columns(table, "q").prompt, detect_columns(table, "q").response) == ("q", "response")
    with pytest.raises(ColumnError, match=r"no column 'nope'; its columns: messages, q, prompt, response"):
        detect_columns(table, "nope")


def test_score_table_adds_the_aggregates_and_one_column_per_member() -> None:
    table = pa.table(
        {"prompt": ["Say two words.", "Say nothing."], "response": ["hello there", ""], "n": [1, 2]}
    )
    out, report = score_table(table, _panel())
    assert out.column_names == ["prompt", "response", "n", *AGGREGATES, "judge_execution", "judge_length",
                                "verdict_execution", "verifiers"]  # fmt: skip
    assert out.column("judge_length").to_pylist() == [2.0, None]  # null where the vote did not count
    assert out.column("judge_execution").to_pylist() == [None, None]  # sft rows: not applicable
    # nothing measured the judge (no labels, no calibration store): its equal mean ranks, 0 votes
    assert out.column("judge_mean").to_pylist() == [2.0, None]
    assert out.column("judge_votes").to_pylist() == [0, 0]
    assert out.column("judge_confidence").to_pylist() == [0.5, None]
    assert report.weights["length"].source == "none"
    again, _ = score_table(out, _panel())  # judging a judged table replaces the columns
    assert again.column_names == out.column_names


def test_a_recorded_execution_is_not_trusted_for_a_row_with_tests() -> None:
    """A table's own ``scores.execution`` said "passed" for a reply that fails its tests, and the
    code verifier passed it unrun: a row with tests is run, whatever the table recorded (here no
    sandbox is configured: the verifier abstains, it does not pass)."""
    execution = {"status": "passed", "exit_code": 0, "duration_ms": 1.0, "stdout_tail": "", "stderr_tail": ""}
    table = pa.table(
        {
            "prompt": ["Write f."],
            "response": ["def f(): return 2"],
            "kind": ["code"],
            "tests": ["def check(candidate):\n    assert candidate() == 1\n"],
            "entry_point": ["f"],
            "scores": [{"execution": execution}],
        }
    )
    out, _ = score_table(table, _panel())
    assert out.column("verdict_execution").to_pylist() == ["abstain"]
    assert out.column("judge_execution").to_pylist() == [None]


def test_an_entry_point_is_taken_from_the_one_function_the_tests_call() -> None:
    """No entry point column, a reply defining two functions: the tests call one of them."""
    from ptfactory.annotators.judges.standalone import judge_rows

    table = pa.table(
        {
            "prompt": ["Write double."],
            "response": ["def helper(x):\n    return x\n\ndef double(x):\n    return 2 * helper(x)\n"],
            "tests": ["assert double(2) == 4\n"],
        }
    )
    (row,) = judge_rows(table, detect_columns(table), tests_column="tests")
    assert (row["kind"], row["entry_point"]) == ("code", "double")


def test_progress_reports_rows_judged_of_total() -> None:
    seen: list[tuple[int, int]] = []
    table = pa.table({"prompt": ["p"] * 5, "response": ["a b c"] * 5})
    score_table(table, _panel(), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(5, 5)]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            pa.table({"prompt": pa.array([], pa.string()), "response": pa.array([], pa.string())}),
            "has no rows",
        ),
        (pa.table({"text": ["a"]}), "no columns to judge found"),
        (pa.table({"prompt": [1], "response": ["a"]}), "holds int64, not strings"),
        (
            pa.table({"prompt": ["a"], "response": pa.array([None], pa.string())}),
            "row 0 of column 'response' is null",
        ),
        (pa.table({"prompt": [b"\xff"], "response": ["a"]}), "holds binary, not strings"),
        (pa.table({"messages": [[{"role": "user", "content": "hi"}]]}), "a final assistant turn"),
        (pa.table({"prompt": ["a"], "response": ["b"], "kind": ["preference"]}), "kind 'preference'"),
    ],
)
def test_bad_tables_raise_one_line_user_errors(table: pa.Table, message: str) -> None:
    with pytest.raises(UserInputError, match=message) as caught:
        score_table(table, _panel())
    assert "\n" not in str(caught.value)


def test_asserts_that_call_a_class_and_a_function_take_the_function() -> None:
    """ho9 R13: MBPP's ``max_chain_length([Pair(5, 24), ...], 4)`` calls two names; the one the
    reply defines as a function is the entry point, and a row with nothing to infer and no
    ``check`` does not fail the table."""
    from ptfactory.annotators.judges.standalone import judge_rows

    reply = (
        "```python\nclass Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n\n"
        "def chain(arr, n):\n    return n\n```\n"
    )
    table = pa.table(
        {
            "prompt": ["Write chain.", "Write it."],
            "response": [reply, "No code here."],
            "tests": ["assert chain([Pair(1, 2)], 1) == 1\n", "assert one(1) == two(2)\n"],
        }
    )
    first, second = judge_rows(table, detect_columns(table), tests_column="tests")
    assert (first["kind"], first["entry_point"]) == ("code", "chain")
    assert (second["kind"], second["entry_point"]) == ("code", None)
    out, _ = score_table(table, _panel())  # the row without an entry point is judged, not an error
    assert out.num_rows == 2
