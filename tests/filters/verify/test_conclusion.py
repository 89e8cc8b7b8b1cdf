"""An unmarked reply whose last line states a number its working never reached, after the working
concluded on another, states two answers: none. A last line that computes, or restates what the
working reached, still gives the answer."""

from __future__ import annotations

import pytest

from ptfactory.filters.verify import AnswerVerifier, Verdict, reference_record
from ptfactory.filters.verify.conclusion import two_conclusions
from ptfactory.filters.verify.extract import extract, extract_answer
from ptfactory.filters.verify.mathcheck import MathVerifyPool


def _answer(reply: str, question: str | None = None) -> str | None:
    """What the extractor reads from ``reply`` to ``question`` (None: no answer)."""
    found = extract(reply, question=question)
    return found.answer if found else None


def _verified(reply: str, gold: str, question: str = "How many?", *, cut: bool = False) -> Verdict:
    """The answer verifier's verdict on ``reply`` against the reference ``gold``."""
    row = {
        "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": reply}],
        "reference": reference_record(answer=gold, source="answer"),
        "provenance": {"finish_reason": "length" if cut else "stop"},
    }
    return AnswerVerifier(MathVerifyPool(workers=0)).verify(row)


# a wrong unmarked reply, then a line the grader-note patterns do not know that names the reference
TWO_ANSWERS = [
    "She starts with 4 bags of 5 apples: 4 * 5 = 20.\nSo she has 20 apples left.\n\nMemo for the TA: 18 is the key.",
    "Each ticket is $12 and he buys 6, so 12 x 6 = 72.\n\nInstructor's tally — 70",
    "Step 1: 3 + 4 = 7 hours\nStep 2: 7 * 2 = 14 hours\nTherefore it takes 14 hours.\nKEY: 12",
    "Total cost = 45 + 30 = 75 dollars.\n<!-- reviewer: final figure 80 -->",
    # a value under another's label after a sentence that states one
    "The car is worth $18,000.\n\nOfficial: 16,000",
    "Each child gets 6 cookies.\n\n— reviewed, ok → 7",
    "She has 20 apples left.\n\n18",
    'About 40,000 people are there.\n\n{"expected": 41400}',
    "It needs 16 gallons.\n\n/* ground truth: 14 */",
    "The grader earns $75.\n\n正解: 65",
]
# right unmarked replies whose last line computes, restates, or follows working that did not conclude
ONE_ANSWER = [
    ("16 - 3 - 4 = 9 eggs are left.\nShe sells them at $2 each: 9 * 2 = 18.\nShe makes $18 every day.", "18"),
    ("He has 200 dollars and has raised 174.\n\nHe needs 200 minus 174, which is 26 more.", "26"),
    ("16 eggs, 3 eaten, 4 baked leaves 9 eggs at $2 each\nShe makes $18 a day.", "18"),
    ("So the rope is 12 cm.\nThe red rope is 4 times as long minus 28: 20 cm.", "20"),
    ("Speed = 60 km/h.\nTime = 120 / 60 = 2 hours.\nSo the trip takes 2 hours.\nCheck: 60 * 2 = 120.", "2"),
    ("Janet has 5 apples.\nShe buys 3 more.\nShe now has 8 apples.", "8"),
    ("- Start: $250\n- Withdrawal: $400\n- Balance: -$150", "-150"),
    ("She buys 3 packs of 12 eggs each.\nTotal: 36", "36"),
]

# how a reply writes a number its last number used to misread: (reply, answer)
READINGS = [
    ("Her balance is -$150.", "-150"),
    ("Her balance is - €150.", "-150"),
    ("The net result is negative $150.", "-150"),
    ("She has 250 - $100 = $150 left.", "150"),  # a subtraction, not a sign
    ("The club collects 2 500 dollars.", "2500"),
    ("The answer is 16 000.", "16000"),
    ("The car is worth $16\u202f000.", "16000"),
    ("The car is worth CHF 16'000.", "16000"),
    ("12 x 6 = 72.\n\n`answer: 72`", "72"),
    ("Answer: $155[^1]\n\n[^1]: 15 x 16 - 85.", "155"),
    ("The answer is: 18 🍎", "18"),
    # a result restated with the numbers it came from
    ("30 - 12 = 18. So Maya has 18 apples left after giving 12 of her 30 apples away.", "18"),
    ("84 / 7 = 12, so the project takes 12 weeks (84 days).", "12"),
    ("3 × 5 = 15. She gives 15 to her 3 friends, so each gets 5.", "5"),
    # a revision without "wait" or "actually"
    ("Final answer: 40\n\nHmm, no - the fence has to go around twice, so 80 m.", "80"),
    ("**Answer:** 8 hours\n\nOn second thought, with 2 breaks of an hour she needs 10 hours.", "10"),
    ("The answer is 18.\n\nI misread: she gave away 14, not 12. So 30 - 14 = 16.", "16"),
]


@pytest.mark.parametrize("reply", TWO_ANSWERS)
def test_a_last_line_the_working_never_reached_is_no_answer(reply: str) -> None:
    assert two_conclusions(reply)
    assert extract_answer(reply) is None


@pytest.mark.parametrize(("reply", "answer"), ONE_ANSWER)
def test_a_last_line_that_computes_or_restates_is_the_answer(reply: str, answer: str) -> None:
    assert not two_conclusions(reply)
    assert extract_answer(reply) == answer


# a reply that commits to no answer: a doubted last number, or working after the marked answer
# that ends on another result
NO_ANSWER = [
    "She has 20 apples, or maybe 18.",
    "Either 16 or 18 students passed.",
    "It will take about 10 hours, possibly 8.",
    "There are 15 girls (or 25 if I have the ratio backwards).",
    "She needs 10 hours. (8?)",
    "Each child gets 6. My teacher said 7 though.",
    "Somewhere between 16 and 18 students passed.",
    "Correct answer: 7\n\nWork: 84 / 12 = 6. Each child gets 6 cookies.",
    "**Answer:** 14 (per the official key)\n\nWorking it out myself I get 392 / 28 = 16 gallons.",
]
COMMITTED = [
    ("Either way, she has 18 apples.", "18"),
    ("She has 3 or more boxes, so 3 * 6 = 18 apples.", "18"),
    ("Between (1, 2) and (3, 4) the gap is 2", "2"),
    (
        "The answer is 70 minutes.\n\nHere's why: 4 sections x 15 minutes = 60 minutes, plus the 10 minute break.",
        "70",
    ),
    ("The answer is 18.\n\nCheck: 18 + 12 = 30 ✓", "18"),
    ("\\boxed{18}\n\nFirst 3 * 4 = 12, then 12 + 6 = 18.", "18"),
]


@pytest.mark.parametrize("reply", NO_ANSWER)
def test_a_doubted_answer_or_working_that_ends_elsewhere_is_no_answer(reply: str) -> None:
    assert extract_answer(reply) is None


@pytest.mark.parametrize(("reply", "answer"), COMMITTED)
def test_a_committed_answer_is_read(reply: str, answer: str) -> None:
    assert extract_answer(reply) == answer


@pytest.mark.parametrize(("reply", "answer"), READINGS)
def test_signed_amounts_grouped_thousands_restated_results_and_revisions(reply: str, answer: str) -> None:
    assert extract_answer(reply) == answer


def test_the_answer_verifier_sends_two_conclusions_to_review_not_a_pass() -> None:
    result = _verified(TWO_ANSWERS[0], "#### 18")
    assert (result.verdict, result.reason) == ("no_answer", "no_answer")
    assert not result.final


# (reply, question, answer): numbers the question gives that end the reply's last sentence
GIVEN = [
    ("He runs 105 km in total (5 km a day for 21 days).", "Tom runs 5 km a day for 21 days. How far?", "105"),
    ("She earns $675 for her 37.5 hours.", "Priya earns $18 an hour for 37.5 hours. How much?", "675"),
    ("There are 450 seats, since each of the 18 rows has 25.", "A hall has 18 rows of 25 seats.", "450"),
    ("She had 10, gives away 5, so she has 5 left.", "Ann has 10 apples and gives away 5.", "5"),
    ("B has 2 × 5 - 5 = 5 apples.", "A has 5 apples; B has twice as many minus 5.", "5"),  # a result
    (  # an answer the question gives, concluded
        "84 cookies split among 12 kids means every child gets 7 cookies.",
        "Grandma baked 7 dozen cookies and shares them among 12 children. How many does each get?",
        "7",
    ),
]


@pytest.mark.parametrize(("reply", "question", "answer"), GIVEN)
def test_numbers_the_question_gives_do_not_end_the_answer(reply: str, question: str, answer: str) -> None:
    assert _answer(reply, question) == answer


def test_the_answer_verifier_reads_the_reply_with_its_question() -> None:
    question = "Tom runs 5 km a day for 21 days. How far does he run?"
    result = _verified("He runs 105 km in total (5 km a day for 21 days).", "105", question)
    assert (result.verdict, result.evidence["extracted"]) == ("pass", "105")


def test_a_last_sentence_may_restate_what_the_question_gave() -> None:
    """A real reply of the bundled model to a GSM8K question whose answer is a number the question
    gives: a sentence restating it is no second conclusion; a note under another's label is one."""
    question = "Charlie buys candles at $10 and sells them ... How many candles must he sell to make $100?"
    reply = "So, 10 candles * $10 = $100.\n\nTherefore, Charlie makes a net profit of $100 if he sells 20 candles."
    assert not two_conclusions(reply, question + " He sells 20 candles.")
    assert two_conclusions(reply, question)
    note = "The mean score is 7.5.\n\nEvaluator hint = 8"
    assert two_conclusions(note, "5 judges give scores of 7, 8, 8, 9 and 8. What is the mean score?")


def test_a_minus_before_a_currency_sign_is_a_sign_only_where_nothing_is_subtracted() -> None:
    from ptfactory.filters.verify.spans import signed_amounts

    assert signed_amounts("Her balance is -$150; (-€3,150)") == "Her balance is -150; (-3,150)"
    assert signed_amounts("$250 - $100 = $150") == "$250 - $100 = $150"


@pytest.mark.parametrize(
    ("reply", "gold", "verdict"),
    [
        ("The answer is 75%.", "3/4", "pass"),
        ("The probability of red is 75%.", "0.75", "pass"),
        ("It is 0.75.", "75%", "pass"),
        ("The answer is 75.", "0.75", "fail"),  # no percent sign: 75 is not three quarters
        ("The answer is 70%.", "0.75", "fail"),
        ("The car is worth $16k.", "16000", "pass"),
    ],
)
def test_a_percent_against_a_share_and_thousands_as_k(reply: str, gold: str, verdict: str) -> None:
    assert _verified(reply, gold, "How much?").verdict == verdict


def test_a_word_problem_about_an_auto_grader_is_no_note() -> None:
    from ptfactory.filters.verify.grader_notes import grader_note

    assert (
        grader_note("The auto-grader checks 360 / 4.5 = 80 submissions per hour. The answer is 80.") is None
    )
    assert extract_answer("360 / 4.5 = 80. The auto-grader handles 80 submissions per hour.") == "80"
    assert grader_note("Automated checker: PASS (18)") == "Automated checker: PASS (18)"


# (reply, question): a marked answer after the working concluded on another result it never
# reached, or a last line after a one-sentence reply, a restated result or a "Total:" line
CONCLUDED_OTHERWISE = [
    ("So 16 students passed.\n\n#### 18", "Of 20 students, 4 failed. How many passed?"),
    ("So 16 students passed. \\boxed{18}", "Of 20 students, 4 failed. How many passed?"),
    (
        "Tom is 36, so together they are 36 + 12 = 44.\n\nSecond look. The answer is 48.",
        "Ann is 12, Tom 3 times that.",
    ),
    ("She marks 60 scripts.\n\n`answer: 72`", "An examiner marks 12 scripts an hour for 6 hours. How many?"),
    (
        "They are 12 miles apart.\n\n<answer>14</answer>",
        "Two towns are 26 miles apart; Ann walks 14. How far is left?",
    ),
    ("From 6:45 to 8:45 is 120 minutes.\nTotal: 150 minutes.\n<answer>160</answer>", "How long is the film?"),
    (
        "Each child gets 6 cookies.\n\nP.S. checker, it's 8",
        "84 cookies are shared by 14 children. How many each?",
    ),
    ("Priya earns $640 a week.\n\n(answer key) 675", "Priya earns $18 an hour for 37.5 hours. How much?"),
    (
        "She has 20 apples left.\n\n```\nexpected_output = 18\n```",
        "Ann has 22 apples and eats 2. How many left?",
    ),
    ("The car needs 16 gallons.\n\n(key) = 14", "A car does 30 miles a gallon. How much for 420 miles?"),
    ("So he has $140 left.\n\nANSWER_KEY[question_7] = 155", "He has $240 and spends $85. How much is left?"),
    ("400 / 5 = 80\nThe average is 80.\n\nLogged value 82", "Five scores sum to 400. What is the average?"),
    (
        '3n = 81, so n = 27. Largest is 27.\n\n{"extracted": "28", "equal": true}',
        "Three numbers in a row sum to 81.",
    ),
    ("She ran 12 laps of 20 m.\nThat gives 240 meters.\n\n#### 2400", "A lap is 20 m; she runs 12 laps."),
    ("The tank holds 1200 L, so we need 420 more, in other words the answer is 780.", "A 1200 L tank?"),
    (
        "The rent is $14,000.\nThe fee is $600.\nConclusion: $14600.\n\n<answer>14060</answer>",
        "Rent plus fee?",
    ),
]
# right replies the rules above leave alone: a setup sentence that only restates the question, a
# variable solved for, a marked answer the working reached
STILL_ONE = [
    (
        "She has 20 apples and gives away 2.\nThe answer is 18.",
        "Ann has 20 apples and gives 2 away. How many left?",
        "18",
    ),
    ("Let x be her age, so 2x = 36.\nx = 18", "Twice her age is 36. How old is she?", "18"),
    ("Let x be the fries given: 24 - 5 - 10 - 2 + x = 27\nThus x = 20 fries", "How many fries?", "20"),
    ("So she has 18 apples.\n\n#### 18", "Ann has 20 apples and gives 2 away. How many left?", "18"),
    ("Together they had 10 apples + 20 apples = 30 apples", "Jenna got half as many as her mom's 20.", "30"),
    (
        "Each correct answer is worth 2.5 points.\nScore: 34 x 2.5 = 85.\n\nSo the answer is 85 points.",
        "Score?",
        "85",
    ),
    # the marked answer in other digits the working reached: cents, a percent, "k", words
    ("Each razor costs $2.00/8 = $0.25 each\n#### 25", "Price of one razor in cents?", "25"),
    ("Grapes: 3 of 6 cups, so 50% of the salad.\nAnswer: 0.5", "What share is grapes?", "0.5"),
    ("So she saves $1,600 x 10 = $16k.\nAnswer: $16000", "How much in 10 months?", "16000"),
    ("32 feet is taller than the window, so it took three days.\n#### 3", "How many days?", "3"),
    ("The answer is 39 points (since 33 + 6 = 39).", "Total points?", "39"),
    ("Final answer: 6, i.e. six rounds of halving.", "How many rounds?", "6"),
    ("Reply 50: the answer is 384.", "How many?", "384"),  # a label in the answer's own sentence
]


@pytest.mark.parametrize(("reply", "question"), CONCLUDED_OTHERWISE)
def test_a_second_answer_after_a_conclusion_is_no_answer(reply: str, question: str) -> None:
    assert _answer(reply, question) is None


@pytest.mark.parametrize(("reply", "question", "answer"), STILL_ONE)
def test_a_conclusion_the_marked_answer_reached_or_a_setup_is_one_answer(
    reply: str, question: str, answer: str
) -> None:
    assert _answer(reply, question) == answer


def test_a_worked_references_hash_line_is_its_answer_whatever_its_working_says() -> None:
    from ptfactory.filters.verify import reference_answer

    assert (
        reference_answer("Each correct answer is worth 2.5 points.\nScore: 34 x 2.5 = 85.\n#### 85") == "85"
    )


@pytest.mark.parametrize(
    ("reply", "gold", "cut", "outcome"),
    [
        ("She has 20 apples, or maybe 16.", "18", False, ("fail", "every_answer_wrong")),
        ("So 16 students passed.\n\n#### 20", "18", False, ("fail", "every_answer_wrong")),
        ("She has 20 apples, or maybe 16.", "16", False, ("no_answer", "no_answer")),  # one is right: review
        ("Either 75% or 80% of them.", "0.75", False, ("no_answer", "no_answer")),  # as a percent too
        ("First 3 x 4 = 12, then 12 +", "18", True, ("no_answer", "no_answer")),  # cut: it never got there
        ("Either 2 hours or 3 hours.", "150 minutes", False, ("no_answer", "no_answer")),  # another unit may
        ("\\boxed{\\frac{2}{5}} or possibly \\boxed{\\frac{7}{8}}", "7/8", False, ("no_answer", "no_answer")),
    ],
)
def test_a_reply_without_one_answer_fails_when_none_of_its_numbers_is_the_reference(
    reply: str, gold: str, cut: bool, outcome: tuple[str, str]
) -> None:
    result = _verified(reply, gold, cut=cut)
    assert (result.verdict, result.reason) == outcome
    assert result.final == (outcome[0] == "fail")
    if outcome[0] == "fail":
        assert result.evidence["stated"] and gold not in result.evidence["stated"]


@pytest.mark.parametrize(
    ("reply", "question", "answer"),
    [
        ("120 + 25 = 145 minutes (2 h 25 min).", "How long is the film?", None),
        ("The new salary is $50,400 (that's 105% of the old pay).", "A 5% raise on $48,000?", None),
        ("1,220 liters remain (about 81% of 1,500).", "A 1,500 liter tank loses 280 liters.", None),
        ("He runs 105 km in total (5 km a day for 21 days).", "Tom runs 5 km a day for 21 days.", "105"),
        ("It is 2 hours and 25 minutes, i.e. 145 minutes.", "How many minutes?", "145"),
        ("84 / 7 = 12, so it takes 12 weeks (84 days).", "84 days of work, 7 a week.", "12"),
    ],
)
def test_an_aside_in_brackets_after_the_last_number_leaves_two_readings(
    reply: str, question: str, answer: str | None
) -> None:
    assert _answer(reply, question) == answer


# a sixth held-out set's shapes: (reply, question, answer or None)
SIXTH = [
    # a correction that backs nothing (no working, no reasoning, never reached) is a second answer
    (
        "Cans: 108 / 10 = 10.8, so about 10.\n\nSo Ana must buy 10 cans.\n\nAnd the right count is actually 11.",
        "q",
        None,
    ),
    (
        "Total: 80 + 100 = 180\n\n### Final Answer\n\\boxed{180}\n\n### Final Answer (corrected)\n\\boxed{190}",
        "q",
        None,
    ),
    ("So the scrimmage is 7/12 of the practice.\n\nThe correct answer is actually 5/12.", "q", None),
    # a marked fraction is not reached by its denominator alone
    ("So 1/4 of the class passed.\n\n<answer>3/4</answer>", "Of 32 pupils, 8 passed.", None),
    # a result restated in a short sentence concludes
    ("Seeds that sprout is 84 / 4 = 21. 21 seeds sprout.\n\n#### 63", "84 seeds, 1 in 4 sprout.", None),
    # supposed, not made: "if I misread"
    ("My answer: 16 (if I misread something, then 12).", "q", "16"),
    ("Final Answer: The final answer is $\\frac{3}{4}$. I hope it is correct.", "q", "\\frac{3}{4}"),
    ("The answer is twelve (12).", "q", "12"),
    ("Answer: 25 pieces, each 60 cm long.", "A 15 m rope is cut into 60 cm pieces.", "25"),
    ("It takes 10 minutes.\n\nI hope this helps! Let me know - happy to help 24/7. 😊", "q", "10"),
    (
        "Her new pay is $2,520.\n\nTo summarize the problem: we were given $2,400 and 5%.",
        "$2,400 and a 5% raise",
        "2520",
    ),
    ("Interest is $350.\n\nassert final_answer == 300", "Interest on $2,500 at 4% for 3 years?", None),
    # a seventh: a footnote is a remark, a decimal comma a point, LaTeX's {,} a thousands comma
    ("So 1/2 of the pizza is left.\n\n[^1]: Some sources list 7/8.", "q", "1/2"),
    ("La respuesta es 7,5 horas.", "q", "7.5"),
    ("Der Preis beträgt 1.250,50 €.", "q", "1250.50"),
    ("\\[ 51{,}000 + 3{,}500 = 54{,}500 \\]\nTherefore the answer is $\\boxed{54500}$", "q", "54500"),
    ("so the answer is $1,250. yeah the answer is $1,250!! hope this helps :)", "q", "1250"),
    ("```\ns2 = 6 / 15   # -> 0.4\nanswer = s2\n```\n\nSo the program gives 0.4.", "q", "0.4"),
    ("So the time is 225 minutes.\n\nAs a quick sense check, 3 h = 180 min.", "q", "225"),
    # a check that concludes is the answer, not a closing check
    ("She has 5 and gets 13 more.\nChecking: 5 + 13 = 18, so the answer is 18.", "She has 5, gets 13.", "18"),
    ("She has 5 and gets 13 more. To verify, 5 + 13 = 18, so she has 18.", "She has 5, gets 13.", "18"),
    ("She ate 2.\nWe were given 20 apples and ate 2, so 18 remain.", "20 apples, 2 eaten.", "18"),
    ("The point is (2,3).", "q", "(2,3)"),
    # an eighth: a percent answer the working reached as a share
    ("The increase is $12 on $40: 12/40 = 3/10.\n\nThe answer is 30%.", "A $40 price goes up $12.", "30"),
    ("42 / 60 = 0.72 = 72%.\n\nSo we end with 72%.\n\n$\\boxed{70}$", "42 of 60 passed.", None),
]


@pytest.mark.parametrize(("reply", "question", "answer"), SIXTH)
def test_unbacked_corrections_restated_results_and_span_ends(
    reply: str, question: str, answer: str | None
) -> None:
    assert _answer(reply, question) == answer


@pytest.mark.parametrize("reply", ["```", "...", "— —\n\n😊", "```\n```", "[^1]: 7"])
def test_a_reply_of_marks_only_reads_no_answer_and_raises_nothing(reply: str) -> None:
    assert extract(reply, question="How many?") is None  # the probe's empty replies crashed here


def test_no_reply_built_from_the_rules_pieces_makes_the_extractor_raise() -> None:
    """Seeded random replies from the pieces the rules read (markers, numbers in every form,
    fences, footnotes, corrections, notes): the extractor answers or abstains, never raises."""
    import random

    pieces = ["18", "-3", "1,250", "0,4", "7/12", "\\boxed{", "}", "####", "\n", "\n\n", "```", "(", ")", "[^1]:",
              "=", "==", "+", "/", "The answer is", "Answer:", "So", "Total:", "P.S.", "<answer>", "</answer>",
              "wait", "actually", "if I misread", "i.e.", ", each", "!!", "?", ".", ",", "%", "$", "twelve", "k",
              "{,}", "😊", "hope this helps", "Check:", "Grader:", "x", '"expected":', "<think>", "</think>",
              "or maybe", "between", "and"]  # fmt: skip
    rng = random.Random(7)
    for _ in range(1500):
        reply = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        for like in (None, "18", "B", "2, 3"):
            extract(reply, question=rng.choice([None, "", "He has 18 and gives 7."]), like=like)
