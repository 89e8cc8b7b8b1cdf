"""The one answer extractor: what models and references write, and what counts as no answer."""

from __future__ import annotations

import pytest

from ptfactory.filters.verify.extract import extract, extract_answer
from ptfactory.filters.verify.inputs import reference_answer

GSM8K_SOLUTION = (
    "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
    "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer's market.\n#### 18"
)


@pytest.mark.parametrize(
    ("text", "answer", "rule"),
    [
        ("#### 18", "18", "hash"),
        (GSM8K_SOLUTION, "18", "hash"),
        ("#### 1,234", "1234", "hash"),
        ("The answer is 18", "18", "stated"),
        ("So the final answer is 18 apples.", "18", "stated"),
        ("Answer: $92.20", "92.20", "stated"),
        ("The answer is: 25%", "25", "stated"),
        ("The answer is 3/4.", "3/4", "stated"),
        ("The answer is \\frac{1}{2}.", "\\frac{1}{2}", "stated"),
        ("The answer is that she saves $18 a day, which is nice", "18", "stated"),
        ("The answer is yes.", "yes", "stated"),
        ("so we get \\boxed{18}", "18", "boxed"),
        ("The final answer is $\\boxed{\\frac{3}{4}}$.", "\\frac{3}{4}", "boxed"),
        ("\\boxed{2} at first, then \\boxed{16,000}", "16000", "boxed"),
        ("<answer>-4</answer>", "-4", "tag"),
        ("She makes $16,000.", "16000", "last_number"),
        ("20 days", "20", "whole"),
        ("**18**", "18", "whole"),
        ("Paris.", "Paris", "whole"),
        ("The eggs cost 20 dollars in 2 days", "2", "last_number"),
        ("3 + 15 = 18.", "18", "last_number"),
        ("It costs 1,234,567 dollars", "1234567", "last_number"),
        ("The temperature drops to -5 degrees", "-5", "last_number"),
        ("The average is then 3.75", "3.75", "last_number"),
        # the last math span when no number follows it (the last number would read 4, 3 and 2)
        ("So the fraction is \\frac{3}{4}.", "\\frac{3}{4}", "last_math"),
        ("Adding them gives $\\frac{7}{8}$ of the cake.", "\\frac{7}{8}", "last_math"),
        ("Solving, \\(x = -\\frac{1}{3}\\)", "-\\frac{1}{3}", "last_math"),
        ("The length is $\\sqrt{2}$.", "\\sqrt{2}", "last_math"),
        ("She had $5 and then $3 more", "3", "last_number"),  # prices, not a math span
        ("The point is (2, -3).", "(2, -3)", "last_math"),
        ("Between (1, 2) and (3, 4) the gap is 2", "2", "last_number"),
        ("The result is \u22123.", "-3", "last_number"),  # a Unicode minus sign
        ("**Answer:** 18", "18", "stated"),
        ("It equals sqrt(2).", "\\sqrt{2}", "last_math"),  # the last number read 2
        ("So the side is √8 cm long.", "\\sqrt{8}", "last_math"),
        ("print(math.sqrt(16)) gives 4", "4", "last_number"),  # code's sqrt stays code
        ("It takes 1 1/2 hours.", "3/2", "last_number"),  # a mixed number, not 1/2 (or 11/2)
        ("#### 2 3/4", "11/4", "hash"),
        ("She has twelve apples.", "12", "word_number"),  # no digits: the last number in words
        ("The answer is twenty-five.", "25", "stated"),
        ("They collected one hundred and five shells.", "105", "word_number"),
        ("She had 12 apples and gave one away.", "12", "last_number"),  # digits first
        ("Final answer: **12** apples", "12", "stated"),  # bold inside the span ("12** apples")
        ("The answer is 2**10", "2**10", "stated"),  # a power, not bold
        ("The answer is 1 million.", "1000000", "stated"),  # a scale word is no unit (read 1)
        ("It sold 2.5 thousand copies", "2500", "last_number"),
        ("The answer is 2½.", "5/2", "stated"),  # a vulgar fraction (read 2½, then nothing)
    ],
)
def test_formats(text: str, answer: str, rule: str) -> None:
    found = extract(text)
    assert found is not None and (found.answer, found.rule) == (answer, rule)
    assert extract_answer(text) == answer


@pytest.mark.parametrize("text", ["", "   ", "I am not sure how to solve this.", None])
def test_no_answer(text: str | None) -> None:
    assert extract_answer(text) is None


@pytest.mark.parametrize(
    ("text", "like", "answer"),
    [
        ("x = 2 or x = 3", "2, 3", "2, 3"),  # a set of solutions expected: the last line's numbers
        ("(x - 2)(x - 3) = 0, so x = 2 or x = 3.", "2, 3", "2, 3"),
        ("The answer is x = -1 or x = 4.", "-1 and 4", "-1, 4"),  # a marked answer's numbers
        ("x = 2", "2, 3", "2"),  # fewer than expected: what there is (compares different)
        ("x = 2 or x = 3", "(2, 3)", "3"),  # a tuple is one answer, not a set
        ("They meet at 3:30 PM.", "3:30 PM", "15:30"),  # a time, on a 24-hour clock
        ("It is 3:30 now.", "15:30", "03:30~"),  # no AM/PM: either half of the day
    ],
)
def test_what_the_expected_answer_looks_like(text: str, like: str, answer: str) -> None:
    assert extract_answer(text, like=like) == answer


def test_the_last_number_fallback_can_be_turned_off() -> None:
    cut = "First, 16 - 3 = 13 eggs. Then 13 - 4 ="  # a response cut at max_tokens
    assert extract_answer(cut) == "4"
    assert extract_answer(cut, fallback=False) is None
    assert extract_answer("The answer is 18", fallback=False) == "18"  # a marked answer still counts


def test_reference_answers() -> None:
    # a seed's free response gives a reference only where it marks its answer
    assert reference_answer(GSM8K_SOLUTION, stated=False) == "18"
    assert reference_answer("Hi!", stated=False) is None
    assert reference_answer("1, 2, 3", stated=False) is None
    # an answer field or a reference column is the answer, whatever its shape
    assert reference_answer("$16,000") == "16000"
    assert reference_answer("\\frac{1}{2}") == "\\frac{1}{2}"
    assert reference_answer("#### 70000") == "70000"
    assert reference_answer("") is None and reference_answer(None) is None


@pytest.mark.parametrize(
    ("text", "like", "answer", "rule"),
    [
        ("Yes, because 17 is prime.", "yes", "yes", "yes_no"),
        ("Yes, because 17 is prime.", None, "17", "last_number"),  # nothing expected: a number
        ("The answer is (B).", "A", "B", "stated"),
        ("#### 42", "A", "42", "hash"),
        ("I pick option D", "A", "D", "choice"),
        ("The answer is 18", "17", "18", "stated"),  # a number expected changes nothing
        ("so the limit is \\boxed{e}", "e", "e", "boxed"),  # a bare lower-case letter is math
    ],
)
def test_an_expected_letter_or_yes_no_reads_that_kind(
    text: str, like: str | None, answer: str, rule: str
) -> None:
    found = extract(text, like=like)
    assert found is not None and (found.answer, found.rule) == (answer, rule)
