"""The non-LLM judges: the execution judge's graded votes (on rows run in the real sandbox) and the
relevance judge's restatement rule (with the bundled MiniLM)."""

from typing import Any

import pytest

from ptfactory.annotators.judges import ExecutionJudge, RelevanceJudge
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.validate import validate_samples
from ptfactory.storage.schema import from_records, sample_id

TESTS = "def check(candidate):\n" + "".join(f"    assert candidate({x}) == {x + 1}\n" for x in (1, 2, 3))


def _code_row(answer: str) -> dict[str, Any]:
    messages = [
        {"role": "user", "content": 'def inc(x):\n    """x plus one"""\n'},
        {"role": "assistant", "content": answer},
    ]
    return {
        "sample_id": sample_id("code", messages, tests=TESTS, entry_point="inc"),
        "batch": "b",
        "kind": "code",
        "messages": messages,
        "tests": TESTS,
        "entry_point": "inc",
        "decisions": [],
    }


@pytest.mark.integration
def test_execution_judge_grades_rows_run_in_the_sandbox() -> None:
    answers = ["    return x + 1\n", "    return x + 1 if x < 3 else 0\n", "    while True:\n        pass\n"]
    with DockerSandbox(Limits(timeout_s=5), workers=2) as sandbox:
        table, _ = validate_samples(from_records([_code_row(a) for a in answers]), sandbox)
    votes = ExecutionJudge("execution").judge(table.to_pylist())
    assert [(v.score, v.verdict) for v in votes] == [(10.0, "accept"), (7.0, "reject"), (1.0, "reject")]
    assert votes[1].rationale == "2/3 assertions held; execution failed"
    assert votes[2].rationale == "execution timeout"  # killed before it could count: 1, as before
    assert {(v.method, v.confidence) for v in votes} == {("execution", None)}


def _judge(execution: dict[str, Any] | None, kind: str = "code") -> tuple[float | None, str]:
    row = {"kind": kind, "messages": [], "scores": {"execution": execution} if execution else None}
    (vote,) = ExecutionJudge("execution").judge([row])
    return vote.score, vote.verdict


def test_execution_judge_scale() -> None:
    assert _judge({"status": "failed", "assertions_passed": 0, "assertions_total": 4}) == (1.0, "reject")
    assert _judge({"status": "failed", "assertions_passed": 3, "assertions_total": 4}) == (7.75, "reject")
    # every assertion it reached held, then it crashed: never a 10 without passing
    assert _judge({"status": "failed", "assertions_passed": 2, "assertions_total": 2}) == (9.0, "reject")
    assert _judge({"status": "passed", "assertions_passed": 0, "assertions_total": 0}) == (10.0, "accept")
    assert _judge({"status": "passed"}) == (10.0, "accept")  # a run from before the counting
    assert _judge({"status": "oom"}) == (1.0, "reject")
    assert _judge(None) == (None, "abstain")
    assert _judge({"status": "passed"}, kind="sft") == (None, "abstain")


def _chat(prompt: str, answer: str, kind: str = "sft") -> dict[str, Any]:
    return {
        "kind": kind,
        "messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}],
    }


def test_relevance_scores_a_restatement_low() -> None:
    judge = RelevanceJudge("minilm")
    ask = "What is the capital of France?"
    answer, copy, echo, off_topic = judge.judge(
        [
            _chat(ask, "Paris is the capital of France."),
            _chat(ask, "The capital of France."),
            _chat(ask, "You are asking what the capital of France is."),
            _chat(ask, "Bananas are rich in potassium."),
        ]
    )
    assert answer.verdict == "accept" and answer.score is not None and answer.score >= 8
    for restated in (copy, echo):
        assert (restated.score, restated.verdict) == (judge.restatement_score, "reject"), restated
    assert copy.rationale.startswith("copies the instruction")
    assert echo.rationale.startswith("restates the instruction")
    assert off_topic.verdict == "reject" and off_topic.score is not None and off_topic.score < 3
    assert {(v.method, v.confidence) for v in (answer, copy, echo, off_topic)} == {("embedding", None)}


def test_relevance_restatement_rule_spares_short_answers_and_code() -> None:
    judge = RelevanceJudge("minilm")
    hello, rewrite, code = judge.judge(
        [
            _chat("Say hi.", "Hi!"),  # every word from the prompt, but an answer
            _chat(
                "Rewrite the sentence in the passive voice.\n\nThe committee approved the new budget on Monday.",
                "The new budget was approved by the committee on Monday.",
            ),
            # a code answer repeats its stub by design: the execution judge grades code
            _chat(
                'def add(a, b):\n    """Return a plus b."""\n',
                'def add(a, b):\n    """Return a plus b."""\n    return a + b\n',
                kind="code",
            ),
        ]
    )
    for vote in (hello, rewrite, code):
        assert vote.score != judge.restatement_score and vote.rationale.startswith("cosine"), vote
    # the same rewrite task answered with its input copied unchanged is a restatement
    (copied,) = judge.judge(
        [
            _chat(
                "Rewrite the sentence in the passive voice.\n\nThe committee approved the new budget on Monday.",
                "The committee approved the new budget on Monday.",
            )
        ]
    )
    assert copied.score == judge.restatement_score
