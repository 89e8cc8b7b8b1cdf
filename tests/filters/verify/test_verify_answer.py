"""The answer verifier through real math-verify: right, wrong, no answer; a timeout, a hung worker
and a call off the main thread abstain (never a silent "wrong")."""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ptfactory.filters.verify import AnswerVerifier, MathVerifyPool, Verdict
from ptfactory.filters.verify.mathcheck import Comparison, compare_answers

QUESTION = "Janet's ducks lay 16 eggs a day... How much does she make every day?"


def row(response: str | None, answer: str | None = "18", **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": QUESTION}]
    if response is not None:
        messages.append({"role": "assistant", "content": response})
    reference = {"answer": answer, "source": "answer", "family": None, "metadata": None, "constraints": None}
    return {"kind": "sft", "messages": messages, "reference": reference if answer else None, **extra}


def stuck_on_99(gold: str, pred: str, timeout_s: int) -> Comparison:
    """Stuck where math-verify's alarm cannot reach when the answer is 99 (module-level: workers
    import it); math-verify otherwise."""
    if pred == "99":
        time.sleep(60)
    return compare_answers(gold, pred, timeout_s)


@pytest.fixture(scope="module")
def pool() -> Iterator[MathVerifyPool]:
    with MathVerifyPool(workers=1, timeout_s=1, hard_timeout_s=20) as shared:
        yield shared


def test_right_wrong_and_no_answer(pool: MathVerifyPool) -> None:
    verifier = AnswerVerifier(pool)
    right, wrong, none, latex, cash = verifier.verify_many(
        [
            row("She sells 9 eggs at $2 each, so she makes $18 every day."),
            row("16 * 24 = 384. The answer is 384."),  # the demo's wrong answer
            row("Ducks are lovely animals."),
            row("\\boxed{\\frac{36}{2}}"),
            row("The answer is $16,000.", answer="16000"),
        ]
    )
    assert (right.verdict, right.score, right.final) == ("pass", 1.0, False)
    assert right.evidence["extracted"] == "18" and right.evidence["expected"] == "18"
    assert (wrong.verdict, wrong.reason, wrong.score, wrong.final) == ("fail", "wrong_answer", 0.0, True)
    assert wrong.evidence["extracted"] == "384" and wrong.evidence["rule"] == "stated"
    assert (none.verdict, none.score, none.final) == ("no_answer", 0.0, False)
    assert latex.passed and cash.passed


@pytest.mark.parametrize(
    ("reference", "response", "verdict"),
    [
        # an option letter: the marked answer's letter, else a reply that names one letter alone
        ("B", "Option B holds: 2 + 2 = 4, and 4 < 7. The answer is (B).", "pass"),
        ("(C)", "Answer: C) 42", "pass"),
        ("(b)", "**(B)**", "pass"),
        ("B", "The correct answer is (C) because 3 > 2.", "fail"),
        ("D", "#### 42", "fail"),  # a marked answer of another kind is not an option
        ("A", "Let me compare (A) 12, (B) 14 and (C) 16 one by one.", "no_answer"),  # lists, no answer
        ("B", "C) Venus", "fail"),  # the held-out run's reply: one line opening with an option
        ("B", "(B) Jupiter\nIt is the largest planet.", "pass"),
        ("B", "A) Mars\nB) Jupiter\nC) Venus", "no_answer"),  # restates the options
        # yes/no (true/false the same): the marked answer's first word, else the reply's
        ("yes", "Yes, because 17 is prime.", "pass"),  # the last number, 17, was read before
        ("no", "No. 21 = 3 * 7.", "pass"),
        ("True", "true", "pass"),
        ("false", "The answer is no, since 9 = 3 * 3.", "pass"),
        ("yes", "No, 15 is 3 * 5.", "fail"),
        ("no", "It depends on 4 things.", "no_answer"),  # never a number for a yes/no question
    ],
)
def test_option_letters_and_yes_no(pool: MathVerifyPool, reference: str, response: str, verdict: str) -> None:
    got = AnswerVerifier(pool).verify(row(response, answer=reference))
    assert got.verdict == verdict, got.evidence
    if verdict != "no_answer":
        assert got.evidence["answer_kind"] in ("choice", "yes_no")


@pytest.mark.parametrize(
    ("reference", "response", "verdict"),
    [
        # a clock time: its last number (30) was read and math-verify parsed "3:30 PM" as symbols
        ("3:30 PM", "They meet at 3:30 PM.", "pass"),
        ("15:30", "The train leaves at 3:30 p.m.", "pass"),
        ("3:30", "So she arrives at 3:30 pm", "pass"),  # no AM/PM in the reference: either half
        ("3:30 PM", "They meet at 3:30 AM.", "fail"),
        ("10:00 AM", "She starts at 8:00 AM and works 2 hours, so 10:15 AM.", "fail"),
        # a set of solutions: the last number alone (3) was read
        ("2, 3", "x = 2 or x = 3", "pass"),
        ("-1, 4", "Factoring: (x+1)(x-4) = 0, so x = -1 or x = 4.", "pass"),
        ("x = 2 or x = 3", "The answer is 3 and 2.", "pass"),
        ("2, 3", "x = 2 or x = 4", "fail"),
        ("2, 3", "x = 2", "fail"),
        # a mixed number (read as 1/2 before) and numbers in words (no answer before)
        ("1.5", "It takes 1 1/2 hours.", "pass"),
        ("2.5", "It takes 1 1/2 hours.", "fail"),
        ("12", "She has twelve apples.", "pass"),
        ("25", "The answer is twenty-five.", "pass"),
        ("4", "There are three cats.", "fail"),
        # bold inside a stated answer, a scale word, a vulgar fraction: each failed before
        ("12", "Final answer: **12** apples", "pass"),
        ("1000000", "The answer is 1 million.", "pass"),
        ("2.5", "The answer is 2½.", "pass"),
        ("3", "The answer is 2½.", "fail"),
    ],
)
def test_times_sets_mixed_numbers_and_words(
    pool: MathVerifyPool, reference: str, response: str, verdict: str
) -> None:
    got = AnswerVerifier(pool).verify(row(response, answer=reference))
    assert got.verdict == verdict, got.evidence


@pytest.mark.parametrize(
    ("reference", "response", "verdict"),
    [
        # wrong answers that passed: words after a number read as its unit
        ("18", "The answer is 18 dollars and 50 cents.", "fail"),
        ("18.50", "The answer is 18 dollars and 50 cents.", "pass"),
        ("2", "The answer is 2 hours 30 minutes.", "fail"),
        ("3", "The answer is 3 and a half hours.", "fail"),
        ("3.5", "The answer is 3 and a half hours.", "pass"),
        ("5", "The answer is 5 feet 6 inches.", "fail"),
        ("20", "The answer is 20 minus 2, which is 18.", "fail"),
        ("18", "The answer is 18 or 20.", "no_answer"),
        ("1.5", "Converting, the answer is 1.5e6", "fail"),
        ("1500", "The answer is 1.5e3", "pass"),
        # the first number of a stated span, a box before a correction, a denied number
        ("3", "The answer is 3 * 6 = 18 boxes.", "fail"),
        ("18", "You might think the answer is 18, but we forgot the 2 she found, so she has 20.", "fail"),
        ("20", "You might think the answer is 18, but we forgot the 2 she found, so she has 20.", "pass"),
        ("18", "The answer is \\boxed{18}.\n\nWait, I made a mistake. So the correct answer is 17.", "fail"),
        ("18", "The answer is not 18.", "no_answer"),
        # a restated question's first word, anagrams through math-verify, a fraction in words, a time
        ("true", "True or False? The statement is false because 0.1 + 0.2 != 0.3 in floating point.", "fail"),
        (
            "false",
            "True or False? The statement is false because 0.1 + 0.2 != 0.3 in floating point.",
            "pass",
        ),
        ("Amy", "The answer is May.", "fail"),
        ("stop", "The answer is tops.", "fail"),
        ("1", "You need one half cup of sugar.", "fail"),
        ("1/2", "The answer is one half.", "pass"),
        ("3:30 AM", "The answer is $\\boxed{3:30 \\text{ PM}}$", "fail"),
        ("3:30 AM", "They meet at 3:30 in the afternoon.", "fail"),
        # text answers: as text, an unmarked one only from a plain final sentence
        ("Paris", "It is not Paris; it is Lyon.", "no_answer"),
        ("Paris", "The capital of France is Paris.", "pass"),
        ("Pacific Ocean", "The answer is the Pacific Ocean.", "pass"),
        ("blue", "It's blue.", "pass"),
        # right answers that failed
        ("12", "The answer is 12 cm^2", "pass"),
        ("12 cm^2", "The area is 12 square cm.", "pass"),  # the reference read 12*c*m^2
        ("18", "#### Final Answer\nThe total is $18.", "pass"),
        ("18", "The answer isn't 18; it's 20.", "fail"),
        ("C) 12", "The answer is C.", "pass"),
        ("(A) 12", "The answer is A.", "pass"),
        ("yes", "\\boxed{\\text{Yes}}", "pass"),
        ("The answer is 18.", "18", "pass"),  # a reference written as a sentence
        ("18", "I don't know.", "no_answer"),  # a short reply in words states no number
        # a self-correction after the answer, a box contradicted by the conclusion, unclosed thinking
        ("B", "The answer is B, no wait, it's C.", "fail"),
        ("B", "Answer: B\n\nActually, C is correct because the reaction releases heat.", "fail"),
        ("yes", "Yes. Wait, no. 91 = 7 × 13, so it is not prime.", "fail"),
        (
            "45",
            "So $\\boxed{60}$.\n\nWait, I made a mistake: she read on 3 days, so $15 \\times 3 = 45$.",
            "pass",
        ),
        ("60", "The answer is 50. Wait, let me recheck: 15 × 4 = 60. So she read 60 pages.", "pass"),
        ("60", "$\\boxed{60}$\n\nSo she reads 45 pages in total.", "no_answer"),
        ("18", "<think>Let me compute 16 - 7 = 9. Then 9 × 2 = 18. So", "no_answer"),
        ("5", "<think>The answer is 5? no.</think>\nShe makes 9 * 2 = 18 dollars.", "fail"),
        ("12", "twelve", "pass"),
    ],
)
def test_wrong_answers_never_pass(pool: MathVerifyPool, reference: str, response: str, verdict: str) -> None:
    got = AnswerVerifier(pool).verify(row(response, answer=reference))
    assert got.verdict == verdict, got.evidence


def test_what_does_not_apply_abstains(pool: MathVerifyPool) -> None:
    verifier = AnswerVerifier(pool)
    no_reference, no_response = row("The answer is 18.", answer=None), row(None)
    assert not verifier.applies(no_reference)
    assert verifier.verify(no_reference).reason == "not_applicable"
    assert (verifier.verify(no_response).verdict, verifier.verify(no_response).reason) == (
        "abstain",
        "no_response",
    )
    procedural = row("<answer>18</answer>")
    procedural["reference"]["family"] = "chain_sum"  # its own scorer decides, not math-verify
    assert not verifier.applies(procedural)


def test_a_truncated_response_gets_no_last_number(pool: MathVerifyPool) -> None:
    cut = row("First 16 - 3 = 13, then 13 - 4 = 9, and 9 * 2 =", provenance={"finish_reason": "length"})
    assert AnswerVerifier(pool).verify(cut).verdict == "no_answer"


def test_a_math_verify_timeout_abstains(pool: MathVerifyPool) -> None:
    started = time.perf_counter()
    verdict = AnswerVerifier(pool).verify(row("The answer is \\boxed{10^{10^{10}}}.", answer="3"))
    assert (verdict.verdict, verdict.reason, verdict.score) == ("abstain", "math_verify_timeout", None)
    assert "timed out" in verdict.evidence["error"]
    assert time.perf_counter() - started < 15  # math-verify's own alarm, in the worker's main thread


def test_a_hung_worker_is_killed_and_abstains() -> None:
    with MathVerifyPool(workers=1, hard_timeout_s=1, compare=stuck_on_99) as stuck:
        assert stuck.compare("1", "1").status == "equal"  # started (a start-up is never a timeout)
        started = time.perf_counter()
        hung, after = AnswerVerifier(stuck).verify_many([row("#### 99"), row("#### 18")])
        assert (hung.verdict, hung.reason) == ("abstain", "math_verify_timeout")
        assert "no result within 1 s" in hung.evidence["error"]
        assert after.passed  # the pool started again (its start-up allowed): the next rows decide
        assert time.perf_counter() - started < 20


def test_off_the_main_thread(pool: MathVerifyPool) -> None:
    # in the calling thread, math-verify's alarm cannot be armed: that abstains, never "wrong"
    inline = AnswerVerifier(MathVerifyPool(workers=0))
    with ThreadPoolExecutor(1) as thread:
        verdict: Verdict = thread.submit(inline.verify, row("#### 18")).result()
    assert (verdict.verdict, verdict.reason) == ("abstain", "math_verify_thread")
    assert inline.verify(row("#### 18")).passed  # on the main thread its alarm works
    # through the worker pool, threads get real verdicts (each task runs on a worker's main thread)
    shared = AnswerVerifier(pool)
    with ThreadPoolExecutor(3) as threads:
        got = list(threads.map(shared.verify, [row("#### 18"), row("#### 19"), row("#### 18")]))
    assert [v.verdict for v in got] == ["pass", "fail", "pass"]


def test_the_pool_pickles_for_a_reward_function(pool: MathVerifyPool) -> None:
    pool.compare("1", "1")  # started: the copy must not carry its processes
    copy = pickle.loads(pickle.dumps(AnswerVerifier(pool)))
    try:
        assert copy.verify(row("#### 18")).passed
    finally:
        copy.pool.close()


USE = """
from ptfactory.filters.verify import AnswerVerifier
from ptfactory.filters.verify.inputs import reference_record
messages = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "The answer is 4."}]
print(AnswerVerifier().verify({"kind": "sft", "messages": messages, "reference": reference_record(answer="4")}))
"""


@pytest.mark.parametrize("how", ["stdin", "unguarded-script"])
def test_workers_that_cannot_start_are_one_clear_error(how: str, tmp_path: Path) -> None:
    # a spawned worker re-imports __main__: from stdin it cannot, and an unguarded script runs its
    # own top level again in the worker. Before, the pool replaced its dying workers forever: each
    # task waited out its timeout while tens of thousands of traceback lines filled the log.
    script = tmp_path / "use.py"
    script.write_text(USE)
    args, stdin = ([sys.executable, "-"], USE) if how == "stdin" else ([sys.executable, str(script)], "")
    done = subprocess.run(
        args, check=False, input=stdin, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode != 0
    assert "the checkers' worker processes cannot start" in done.stderr, done.stderr[-2000:]
    assert 'an `if __name__ == "__main__":` guard' in done.stderr
    assert len(done.stderr.splitlines()) < 200


def test_compare_answers_directly() -> None:
    assert compare_answers("0.5", "\\frac{1}{2}").status == "equal"
    # words are text, not products of symbols (math-verify made "May" equal "Amy")
    assert compare_answers("Amy", "May").status == "different"
    assert compare_answers("Pacific Ocean", "the pacific ocean").status == "equal"
    assert compare_answers("", "3").status == "gold_unparsed"


@pytest.mark.parametrize(
    ("reference", "response", "verdict", "reason"),
    [
        ("20 minutes", "It takes 20 seconds.", "fail", "wrong_unit"),  # passed: units were stripped
        ("20 minutes", "So the total is 20 hours.", "fail", "wrong_unit"),
        ("3 kg", "The answer is 3 g.", "fail", "wrong_unit"),
        ("20 minutes", "It takes 1,200 seconds.", "pass", "correct"),  # failed: 1200 != 20
        ("4500 m", "She walks 4.5 km.", "pass", "correct"),
        ("2 hours", "The trip takes 120 minutes, i.e. 2 hours.", "pass", "correct"),
        ("20 minutes", "It takes 20 minutes.", "pass", "correct"),
        ("20 minutes", "The answer is 20.", "pass", "correct"),  # no unit in the reply: a number
        ("20 minutes", "He bought 20 apples.", "pass", "correct"),  # not a unit of time
        ("5 m", "There are 5 in the box.", "pass", "correct"),  # "in" is a word here
        ("#### 20", "It takes 20 seconds.", "pass", "correct"),  # no unit in the reference
    ],
)
def test_an_answer_in_another_unit_of_the_references_kind_is_converted(
    pool: MathVerifyPool, reference: str, response: str, verdict: str, reason: str
) -> None:
    got = AnswerVerifier(pool).verify(row(response, answer=reference))
    assert (got.verdict, got.reason) == (verdict, reason), got.evidence
