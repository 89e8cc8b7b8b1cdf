"""The extractor's last-number fallback (:mod:`~ptfactory.filters.verify.extract`) and the rules
that qualify it for a reply that marks no answer: two conclusions, a doubted number, a result
restated with its inputs, numbers the question gave, an aside in brackets; and where a reply's
working stands against its marked answer or its correction: a marked answer after another
conclusion (:func:`concluded_before`), a correction nothing backs (:func:`backed`). The numbers a
reply states in any form (:func:`stated_values`) are what the answer verifier searches for the
reference before it fails a reply of several answers.

A reply that marks no answer is read by its last number. A note the grader-note patterns miss,
appended to a wrong reply ("So she has 20 apples left.", then "Memo for the TA: 18 is what the key
says."), would make that number the note's. What tells such a line from a reply's own last
sentence is structural: the working before it concluded on another number ("= 20", "So she has 20
apples"), and the line neither computes (no operator, no "minus" or "twice") nor repeats a number
the working reached. The reply then states two answers, and two answers are none (review, never a
guess); a last line that computes, or restates what came before, still gives the answer.

Measured on GSM8K's 1,319 test solutions with one step per paragraph and the ``####`` line removed:
3 read as two answers, 2 of them right ("Y = 12 cm", then "The red rope was 20 cm long."; "2.2 -
.44 = 1.76 inches", then "... he will recycle this stick in 2 days"), 1 whose last number was not
its answer ("... = 15 hours", then "It would take 15 hours to clean 45 rooms"): those go to review.
"""

from __future__ import annotations

import re
from fractions import Fraction

from ptfactory.filters.verify.markers import CHECK_LINE, RESULT, SENTENCE_END
from ptfactory.filters.verify.number_words import word_numbers
from ptfactory.filters.verify.spans import NUM, NUMBER, normalize_answer, number_value

__all__ = [
    "aside",
    "backed",
    "concluded_before",
    "hedged",
    "last_number",
    "restated_result",
    "stated_values",
    "two_conclusions",
]

# a number denied where it stands: "The answer isn't 18.", "..., not 20."
_DENIED = re.compile(r"(?:\bnot|n't|\bnever|\binstead\s+of|\brather\s+than)\s+[^.;,\d\n]{0,20}$", re.I)
_SCALE_AFTER = re.compile(r"(?:\s+(?:hundred|thousand|million|billion|trillion)\b|[kK]\b)?", re.I)
# scientific notation written out: "3 × 10^8", "1.5 \times 10^{6}"
_TIMES_TEN = re.compile(r"(\d+(?:\.\d+)?)\s*(?:×|\\times|\\cdot|\*)\s*10\s*\^\s*\{?\s*(-?\d+)\s*\}?")
# a line that computes: an operator between numbers, "=", or an operation in words
_COMPUTES = re.compile(
    r"[\d)%]\s*[-+*/×÷x^]\s*[$(]?\d|=|\\(?:times|cdot|div|frac)\b|\b(?:plus|minus|times|divided|multipl\w*"
    r"|equals?|sum|product|difference|subtract\w*|add(?:s|ed|ing)?|twice|double[sd]?|triple[sd]?|half"
    r"|halve[sd]?|quarter|percent|remain\w*|left\s+over|per|each|every|total)\b",
    re.I,
)
# where a line concludes: an equation's result, or "so", "therefore" and their kin
_CONCLUDES = re.compile(
    r"=|\b(?:so|therefore|thus|hence|in\s+all|altogether|(?:that|this|which)\s+(?:means|gives|makes|leaves)|we\s+get)\b"
    r"|^\W*(?:total|conclusion|result|overall)\b",
    re.I,
)


def _values(text: str) -> set[object]:
    """Every number of ``text`` by its value ("18", "18.0" and "$18" are one; "$16k" is 16000)."""
    found: set[object] = set()
    for match in NUMBER.finditer(text):
        scale = _SCALE_AFTER.match(text, match.end())
        answer = normalize_answer(match.group(0) + (scale.group(0) if scale else ""))
        value = number_value(answer) if answer else None
        found.add(value if value is not None else answer)
        if "/" in match.group(0):  # "84 / 7" is a division as well as a fraction: 84 and 7 are there too
            found |= {number_value(part.strip()) for part in match.group(0).split("/")} - {None}
    return found


def stated_values(text: str) -> set[Fraction]:
    """The value of every number ``text`` states, in digits or in words ("7", "$7.00", "seven")."""
    values = {v for v in _values(text) if isinstance(v, Fraction)}
    return values | {v for w in word_numbers(text) if (v := number_value(w)) is not None}


# a line that is a label and a number, or a number alone: "Official: 16,000", "(Gold label: 12)",
# "— reviewed, ok → 7", '{"expected": 41400}', "/* ground truth: 14 */", "18"
_FRAGMENT = re.compile(
    r"^(?:(?P<label>[^\d\n]{0,60}?)[:：=→>–—-]|[^\w\d\n]*)\s*[\"'(\[{]?\s*-?\s*(?:\\?\$|€|£|¥)?\s*\d[\d,.' ]*"
    r"\s*(?:%|[)\]}\"'`]|\*/|-->|\s)*[.!]?$"
)
# a label that names the reply's own result: "Total: 18", "Final answer: 18", "Result = 18", "x = 18"
_OWN_LABEL = re.compile(r"^\W*(?:(?:final\s+)?(?:answer|result|total|sum|answer\s+is)|[a-z])\W*$", re.I)


def _sentence(line: str) -> bool:
    """A line written as a sentence, not as a label and a value: "The car is worth $18,000."."""
    return not _FRAGMENT.match(line.strip()) and len(re.findall(r"[^\W\d_]{2,}", line)) >= 3


# the last number offered as one of two, or doubted: "20, or maybe 18", "Either 16 or 18", "about 10
# hours, possibly 8", "(8?)", "Though 25 also seems plausible", "my friend got $100"
_HEDGED = re.compile(
    r"\b(?:either(?!\s+way)|or|maybe|perhaps|possibly|plausible|though|unsure|not\s+sure|could\s+be|might\s+(?:be|get)"
    r"|(?:friend|teacher|book|key|someone|others?)\s+(?:got|says?|said|has|had|thinks?))\b|\?",
    re.I,
)
# a range ending on the last number: "between 16 and 18", "between $16,000 and "
_BETWEEN = re.compile(rf"\bbetween\s+[$€£¥]?(?:{NUM})(?:\s+[a-z]+)?\s+and\s+[$€£¥]?$", re.I)


def hedged(text: str) -> bool:
    """True when the sentence holding ``text``'s last number offers it beside another or doubts it,
    and a number before it says something else: the reply commits to no answer."""
    sentences = [part for part in SENTENCE_END.split(text.strip()) if NUMBER.search(part)]
    if not sentences or _COMPUTES.search(sentences[-1]):
        return False
    last = sentences[-1]
    numbers = list(NUMBER.finditer(last))
    before = last[: numbers[-1].start()]
    # the doubt between the number before and the last one, or after the last
    doubt = before[numbers[-2].end() if len(numbers) > 1 else 0 :] + last[numbers[-1].end() :]
    if not _HEDGED.search(doubt) and not _BETWEEN.search(before):
        return False
    earlier = _values(before) | _values("".join(sentences[:-1])[-400:])
    return bool(earlier - _values(numbers[-1].group(0)))


# a number inside a name is no value, nor a key a word: a footnote's mark "[^1]", an identifier
# "question_7", "Q3", a JSON key '"equal":'
_NAMED = re.compile(r"\[\^\w+\]|\b[A-Za-z_]+\d\w*|\"\w+\"\s*:")


def _unnamed(text: str) -> str:
    return _NAMED.sub(" ", text)


def _computes(line: str) -> bool:
    """A line that computes: :data:`_COMPUTES`, where an "=" with no number before it on the line
    after a name ("expected_output = 18", "key = 14") is no equation ("x = 20", "20 sheep + 160
    sheep = 180 sheep" are)."""
    first = re.search(r"={1,2}", line)
    if (
        first
        and not re.search(r"\d", line[: first.start()])
        and re.search(r"(?:\w\w|[\])])\s*$", line[: first.start()])
    ):
        line = line[: first.start()] + " " + line[first.end() :]  # "assert final_answer == 5.5" too
    return bool(_COMPUTES.search(line))


def _restates_result(before: list[str], sentence: bool = True) -> bool:
    """The working's last line (a ``sentence``, where asked) restates a result its working
    computed: "The average is 80." after "400 ÷ 5 = 80", "21 seeds sprout." after "84 / 4 = 21"."""
    last = list(NUMBER.finditer(before[-1]))
    results = {v for line in before[:-1] for m in RESULT.finditer(line) for v in _values(m.group(1))}
    return (
        (_sentence(before[-1]) or not sentence) and bool(last) and bool(_values(last[-1].group(0)) & results)
    )


def _sole_result(before: list[str], question: str | None) -> bool:
    """The working is one sentence that states a number the question does not give: the reply's
    own result ("Her score is 16."), what a later line's other number contradicts."""
    sentences = [s for line in before for s in SENTENCE_END.split(line) if NUMBER.search(s)]
    return question is not None and len(sentences) == 1 and bool(_values(sentences[0]) - _values(question))


def two_conclusions(text: str, question: str | None = None) -> bool:
    """True when ``text``'s last line states a number its working did not reach (nor the
    ``question`` gave), after that working concluded on another: the last number is then no
    answer. The working concluded where its last line with a number says so ("so", "=") or is a
    sentence before a value under another's label, or where it is one sentence stating a result
    ("Each child gets 6 cookies.", then "P.S. checker, it's 7")."""
    lines = [_unnamed(line) for line in text.strip().splitlines() if re.search(r"[^\W_]", line)]
    if not lines:  # nothing but marks: "```", "..."
        return False
    while len(lines) > 1 and CHECK_LINE.match(lines[-1]):
        lines.pop()
    numbers = list(NUMBER.finditer(lines[-1]))
    before = [line for line in lines[:-1] if NUMBER.search(line)]
    if not numbers or not before:
        return False
    fragment = _FRAGMENT.match(lines[-1].strip())
    if fragment and not _OWN_LABEL.match(fragment.group("label") or "·"):
        # a value under another's label ("Official: 16,000") after a sentence that states one
        concluded, given = _sentence(before[-1]) or _sole_result(before, question), ""
    elif _computes(lines[-1]):
        return False
    else:  # a sentence may restate what the question gave ("... if he sells 20 candles.")
        concluded = (
            bool(_CONCLUDES.search(before[-1])) or _sole_result(before, question) or _restates_result(before)
        )
        given = question or ""
    if not concluded:
        return False
    return not _values(numbers[-1].group(0)) & _values("\n".join([*before, given]))


# working: an operator between numbers, or an equation with a number ("15 x 3 = 45", "= 17"); a
# fraction ("5/12", "\\frac{5}{12}") is a number, not working
_WORKING = re.compile(r"[\d)]\s*[-+*×÷x]\s*[$(]?\d|\d\s+/\s+\d|=\s*[$(]?-?\d|\d\s*=|\\(?:times|div)\b")


def backed(answer: str, before: str, after: str) -> bool:
    """A corrected answer the reply backs: the working ``before`` the correction reached it, or the
    text ``after`` it computes or reasons ("Wait, I made a mistake: 15 x 3 = 45", "Hmm, no - the
    fence goes around twice, so 80 m."). "So Ana must buy 10 cans. P.S. The correct answer is
    actually 11." and "Final Answer (corrected): \\boxed{190}" back nothing: a claim, not a
    correction."""
    value = number_value(normalize_answer(answer) or "")
    if value is None:  # a letter, a word, an expression: "no wait, it's C"
        return True
    reasons = len(re.findall(r"[^\W\d_]{2,}", after)) >= 4
    return value in stated_values(before) or reasons or bool(_WORKING.search(after))


def concluded_before(before: str, answer: str, question: str | None = None, *, percent: bool = False) -> bool:
    """True when the working ``before`` a marked answer concluded on a result of its own and never
    reached the marked ``answer``: "So 16 students passed." then "#### 18", "Tom is 36, so together
    they are 36 + 12 = 44." then "Answer key: The answer is 48." The reply states two answers.
    A conclusion is the last sentence with a number, where it says so ("so", "=") or is the only
    one, and states a number the ``question`` does not give (a setup that restates the question,
    "She has 20 apples and gives 2 away.", concludes nothing). Numbers in words count ("so it took
    three days" reached 3), and so does the same digits in cents or percent ("$0.25 each" reached 25;
    a ``percent`` answer, 30%, any share of 3/10)."""
    before = _unnamed(before)
    # the marked answer's own sentence concludes before it only where it says so ("so we need 420
    # more — in other words the answer is 780"; not "Reply 50: the answer is 384.")
    *sentences, own = SENTENCE_END.split(before.lstrip())
    sentences = [s for s in sentences if stated_values(s)]
    if stated_values(own) and _CONCLUDES.search(own):
        sentences.append(own)
    # the marked answer's own value: "5/12" is not reached by a 12 ("7/12" before it)
    own_value = number_value(normalize_answer(answer) or "")
    marked = {own_value} if own_value is not None else stated_values(answer)
    reached = stated_values(before)
    # cents and percents: "0.25" and "50%", not a division ("42 / 60" is 0.7, not 70)
    plain = {
        number_value(normalize_answer(m.group(0)) or "")
        for m in NUMBER.finditer(before)
        if "/" not in m.group(0)
    }
    if percent:  # "12/40 = 3/10." then "The answer is 30%.": the share reached, as a percent
        reached |= {v * 100 for v in reached}
    if not sentences or any(v in reached or v * 100 in plain or v / 100 in plain for v in marked):
        return False
    if not stated_values(sentences[-1]) - stated_values(question or ""):
        return False
    sole = question is not None and len(sentences) == 1 and sentences[-1] is not own
    return bool(_CONCLUDES.search(sentences[-1])) or sole or _restates_result(sentences, sentence=False)


# an aside in brackets after the last sentence's number: "145 minutes (2 h 25 min).", "$50,400
# (that's 105% of the old pay)"; "2 hours 25 minutes, i.e. 145 minutes." ends on its answer
_ASIDE = re.compile(rf"(?:{NUM})[^\d\n().;]{{0,30}}?\(([^()\n]*\d[^()\n]*)\)\s*[.!]?\s*$", re.I)


def aside(text: str, question: str | None = None) -> bool:
    """True when ``text`` ends on a number and then an aside with other numbers that does not
    compute: a conversion ("145 minutes (2 h 25 min)."), a share ("$50,400 (that's 105% of the old
    pay)"). Which one is the answer the text does not say: none is read (review when one is the
    reference's, a fail when none is). An aside that only restates what the ``question`` gave ("105
    km in total (5 km a day for 21 days)") leaves the number before it the answer."""
    match = _ASIDE.search(text.rstrip())
    if match is None:
        return False
    said = match.group(1)
    if _COMPUTES.search(said) and not re.search(r"%|percent", said):
        return False
    return not _values(said) <= _values(question or "")


def restated_result(text: str) -> str | None:
    """The last equation's result where the reply restates it and then only repeats numbers the
    working started from: "30 - 12 = 18. So Maya has 18 apples left after giving 12 of her 30
    apples away." gives 18 (the last number, 30, is an input); "84 / 7 = 12, so it takes 12 weeks
    (84 days)" gives 12. None where the text goes on to compute ("..., so each gets 5")."""
    results = list(RESULT.finditer(text))
    if not results:
        return None
    last = results[-1]
    result, tail = _values(last.group(1)), text[last.end() :]
    restated = [n for n in NUMBER.finditer(tail) if _values(n.group(0)) & result]
    if not restated:
        return None
    rest = tail[restated[-1].end() :]
    after = list(NUMBER.finditer(rest))
    inputs = _values(text[: last.start()])
    if not after or _COMPUTES.search(rest) or _CONCLUDES.search(rest):
        return None
    if all(_values(n.group(0)) <= inputs for n in after):
        return normalize_answer(last.group(1))
    return None


# how a sentence goes on to restate what it was given: "(5 km a day for 21 days)", "for her 37.5
# hours", "over the 3 years", "since each of the 18 rows has 25", "85 out of 100"
_RESTATES = re.compile(
    r"\(|\b(?:for|over|at|in|since|from|out\s+of|per|during|with|by|after|because|as)\b", re.I
)
# and how it goes on to conclude instead: "84 cookies ... means every child gets 7"
_CONCLUDES_TOO = re.compile(
    r"=|\b(?:so|therefore|thus|hence|means|gets?|leaves?|left|remains?|equals?|makes?|gives?|is|are|was|were)\b",
    re.I,
)


def _same_sentence(text: str, first: re.Match[str], second: re.Match[str]) -> bool:
    return not re.search(r"[.!?](?:\s|$)|\n", text[first.end() : second.start()])


def last_number(text: str, question: str | None = None) -> str | None:
    """The last number of ``text`` (a check after the answer left out), with a scale word after it
    ("2.5 thousand" is 2500, not 2.5). Given the ``question``, numbers it gives that end the last
    sentence are passed over for one it does not give in that sentence: "He runs 105 km in total (5
    km a day for 21 days)." is 105, "She earns $675 for her 37.5 hours." 675."""
    lines = text.rstrip().splitlines()
    while len(lines) > 1 and CHECK_LINE.match(lines[-1]):
        lines.pop()
    text = "\n".join(lines)
    # not a unit's exponent: "12 cm^2" ends on 12
    numbers = [n for n in NUMBER.finditer(text) if not re.search(r"[a-zA-Z}]\^\{?$", text[: n.start()])]
    while len(numbers) > 1 and re.match(r"-[a-zA-Z]", text[numbers[-1].end() :]):
        numbers.pop()  # an adjective's number: "84 kilometres on each 4-week cycle" ends on 84
    if not numbers:
        return None
    if question and (given := _values(question)):
        k = len(numbers) - 1
        while (
            k > 0
            and _values(numbers[k].group(0)) <= given
            and _same_sentence(text, numbers[k - 1], numbers[k])
            and not re.search(r"=\s*[$€£¥]?\s*$", text[: numbers[k].start()])  # a result stays one
        ):
            k -= 1
        rest = text[numbers[k].end() : numbers[-1].end()]
        if (
            not _values(numbers[k].group(0)) <= given
            and _RESTATES.search(rest)
            and not _CONCLUDES_TOO.search(rest)
        ):
            numbers = numbers[: k + 1]
    if _DENIED.search(text[: numbers[-1].start()]):  # "The answer is not 18.": no answer
        return None
    powers = [m for m in _TIMES_TEN.finditer(text) if m.end() >= numbers[-1].end()]
    if powers:  # "3 × 10^8 m/s": 300000000, not 8
        return normalize_answer(f"{powers[-1].group(1)}e{powers[-1].group(2)}") or ""
    scale = _SCALE_AFTER.match(text, numbers[-1].end())
    answer = normalize_answer(numbers[-1].group(0) + (scale.group(0) if scale else ""))
    return answer or None
