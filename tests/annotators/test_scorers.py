"""The non-LLM judge: the relevance judge's restatement rule (with the bundled MiniLM). (Code rows
are the code verifier's: tests/filters/verify.)"""

from typing import Any

from ptfactory.annotators.judges import RelevanceJudge
from ptfactory.storage.schema import sample_id

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
