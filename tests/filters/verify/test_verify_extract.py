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
        ("\\boxed{2} at first, but that was a mistake: \\boxed{16,000}", "16000", "boxed"),
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
        # words after a number that carry more of the answer are no unit (each read its first number)
        ("The answer is 18 dollars and 50 cents.", "37/2", "stated"),
        ("The answer is 2 hours 30 minutes.", "5/2", "stated"),  # one amount in the first unit
        ("The answer is 5 feet 6 inches.", "11/2", "stated"),
        ("The answer is 3 and a half hours.", "7/2", "stated"),
        ("The answer is 20 minus 2, which is 18.", "18", "stated"),
        ("Converting, the answer is 1.5e6", "1500000", "stated"),  # scientific notation (read 1.5)
        ("The speed of light is about 3 × 10^8 m/s.", "300000000", "last_number"),  # (read 8)
        # a stated equation gives what follows its last "=" (each read its first number)
        ("The answer is 3 * 6 = 18 boxes.", "18", "stated"),
        ("So the answer is 12 + 6 = 18.", "18", "stated"),
        ("The answer is 18 (9 eggs × $2).", "18", "stated"),
        # an answer taken back, negated or corrected is not the answer
        (
            "You might think the answer is 18, but we forgot the 2 she found, so she has 20.",
            "20",
            "last_number",
        ),
        (
            "The answer is \\boxed{18}.\n\nWait, I made a mistake: 3, not 2. So the correct answer is 17.",
            "17",
            "stated",
        ),
        ("The answer isn't 18; it's 20.", "20", "last_number"),  # read "n't 18"
        ("The answer is 18, not 20.", "18", "stated"),
        # markdown headings are no GSM8K answer (each read the heading)
        ("#### Step 1: Eggs\nShe has 9 eggs.\n#### Step 2: Money\n9 * 2 = 18, so $18.", "18", "last_number"),
        ("#### Final Answer\nThe total is $18.", "18", "last_number"),
        ("#### The answer is 18", "18", "hash"),  # a line with one number in it
        ("So the answer is 18!", "18", "stated"),  # not 18 factorial
        ("The answer is about 18 apples", "18", "stated"),
        ("The answer is negative 5.", "-5", "stated"),
        ("The answer is 12 cm^2", "12", "stated"),
        ("The area is 12 cm^2.", "12", "last_number"),  # not the exponent
        ("The answer is 45°.", "45", "stated"),
        ("She has 18 apples left.\nCheck: 18 + 2 = 20.", "18", "last_number"),  # a check comes after
        # fractions in words (read 1 and the text)
        ("You need one half cup of sugar.", "1/2", "word_number"),
        ("The answer is three-fourths.", "3/4", "stated"),
        ("The answer is 8 hundred.", "800", "stated"),
    ],
)
def test_formats(text: str, answer: str, rule: str) -> None:
    found = extract(text)
    assert found is not None and (found.answer, found.rule) == (answer, rule)
    assert extract_answer(text) == answer


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "I am not sure how to solve this.",
        None,
        # several candidates, a denied number or a box and a later answer that disagree: no guess
        "The answer is 18 or 20.",
        "The answer is x = 5 and y = 3",
        "The answer is not 18.",
        "#### 18 or 20",
        "\\boxed{18 \\text{ or } 20}",
        "The answer is \\boxed{18}.\n\nThe answer is 17.",
    ],
)
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
        # the verdict word, not a restated "True or False?" (read "yes")
        (
            "True or False? The statement is false because 0.1 + 0.2 != 0.3 in floating point.",
            "true",
            "no",
            "yes_no",
        ),
        ("\\boxed{\\text{Yes}}", "yes", "yes", "boxed"),
        ("The answer is 17, which is prime, so yes.", "yes", "yes", "yes_no"),
        ("After checking, 17 is prime. So yes.", "yes", "yes", "yes_no"),
        ("The correct option is C) 12", "C", "C", "stated"),
        ("The answer is option B.", "B", "B", "stated"),
        ("The correct answer is choice (C).", "C", "C", "stated"),
        ("The answer is \\boxed{\\textbf{(B)}}", "B", "B", "boxed"),
        ("The answer is 12, which is option C.", "C", "C", "choice"),
        ("The answer is C.", "C) 12", "C", "stated"),  # a reference with the option's text
        ("The answer is $\\boxed{3:30 \\text{ PM}}$", "3:30 AM", "15:30", "boxed"),  # read 3:30
        ("They meet at 3:30 in the afternoon.", "3:30 AM", "15:30", "time"),
        # a text answer: compared as text, an unmarked one only from a plain final sentence
        ("The answer is the Pacific Ocean.", "Pacific Ocean", "pacific ocean", "stated"),
        ("The capital of France is Paris.", "Paris", "paris", "text"),
        ("It's blue.", "blue", "blue", "text"),
        ("Amy is older.", "Amy", "amy", "text"),
    ],
)
def test_an_expected_letter_or_yes_no_reads_that_kind(
    text: str, like: str | None, answer: str, rule: str
) -> None:
    found = extract(text, like=like)
    assert found is not None and (found.answer, found.rule) == (answer, rule)


@pytest.mark.parametrize(
    ("text", "like"),
    [
        ("It is not Paris; it is Lyon.", "Paris"),  # a negation in the final sentence
        ("Amy is older than May.", "May"),  # a comparison names two
        ("Yes and no.", "yes"),
        ("The answer is (B) or (C).", "B"),  # two letters: compares as the text it is, never B
    ],
)
def test_an_unsure_reply_of_a_kind_gives_no_such_answer(text: str, like: str) -> None:
    found = extract(text, like=like)
    assert found is None or found.answer not in ("paris", "may", "yes", "B")


@pytest.mark.parametrize(
    ("text", "like", "answer"),
    [
        (
            "Subtract 3: 2x = 10, so x = 5.\n\nLet me know if you have questions (1-2 follow-ups welcome).",
            None,
            "5",
        ),
        ("So 18 muffins are left.\n\nHope this helps (ask 1-2 questions!)", None, "18"),
        ("2x = 10, so x = 5.\n\nThanks! Happy to help with 2 more.", None, "5"),
        ("4 + 6 = 10.\n\nGood luck on test 3!", None, "10"),
        ("It gives $\\boxed{18}$.\n\nSo that's it - happy to go over any of the 2 steps again!", None, "18"),
        ("24 - 6 = 18\n#### 18\n\nOverall, a nice warm-up; try the 3 bonus problems next.", None, "18"),
        ("The capital of France is Paris. I hope that helps!", "Paris", "paris"),
        ("So she has 18 apples. That's 18 in total.", None, "18"),  # a conclusion, no pleasantry
    ],
)
def test_the_pleasantries_that_end_a_reply_are_no_answer(text: str, like: str | None, answer: str) -> None:
    """A closing remark's numbers ("(1-2 follow-ups welcome)", "Good luck on test 3!") were read as
    the answer by the last-number rule, or contradicted a box: a right reply failed."""
    assert extract_answer(text, like=like) == answer


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        # the factory's own replies (SmolLM2 on the demo's seeds) read wrongly
        ("21 * 4 = 84. This means the cyclist rides 84 kilometres on each 4-week cycle.", "84"),
        (
            "So the answer is 180 pages per hour. The last sentence is incorrect. "
            "The answer to this question is 72 minutes.",
            "72",
        ),
        ("The answer to the problem is 72 minutes, not 80.", "72"),
        ("She is a 12-year-old girl.", "12"),  # the only number: still read
    ],
)
def test_the_factorys_own_replies(text: str, answer: str) -> None:
    assert extract_answer(text) == answer


@pytest.mark.parametrize(
    "text",
    [
        # a note the grader-note patterns do not know, with a marker of its own: the reply states
        # two answers, and neither is read (it was the note's, the last one)
        "The total is \\boxed{56}.\n\nRubric check passed: \\boxed{63}",
        "\\boxed{56}\n\n[checker] status=OK\n#### 63",
        "#### 56\n\n<answer>63</answer>",
        "\\boxed{2} at first, then \\boxed{16,000}",
        "The answer is 384.\n\nThe correct answer is 18.",  # two stated answers
    ],
)
def test_two_marked_answers_without_a_correction_are_no_answer(text: str) -> None:
    assert extract_answer(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "The answer is simple: we add them. \\boxed{18}",
        "The answer is straightforward.\n\n#### 18",
        "The answer is 20 minus 2, which is 18.\n#### 18",
        "The answer is 18. \\boxed{18}",
    ],
)
def test_an_earlier_stated_answer_in_words_or_the_same_number_is_no_second_answer(text: str) -> None:
    assert extract_answer(text) == "18"
