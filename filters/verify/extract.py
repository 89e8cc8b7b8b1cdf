"""The one answer extractor: the final answer a text states, as a short normalised string.

Every reader of final answers uses it: the answer verifier (a response's answer and a reference
written as a worked solution), the procedural verifier (after reasoning-gym's ``<answer>`` tag),
difficulty's math pass rate and the GRPO rewards. Extraction is separate from comparison
(math-verify compares, :mod:`ptfactory.filters.verify.mathcheck`), as in PrimeIntellect's
verifiers and TRL.

Rules, first match wins (``Extraction.rule`` names the one that matched):

==============  ==================================================================================
rule            what it reads
==============  ==================================================================================
``hash``        GSM8K's ``#### 18`` (the last such line that is an answer: a markdown heading,
                "#### Step 1: Eggs", "#### 2. Money", "#### Final Answer", is none)
``tag``         the last ``<answer>…</answer>`` block (reasoning-gym's format)
``boxed``       the last ``\\boxed{…}`` / ``\\fbox{…}`` (braces balanced)
``stated``      the last "the (final) answer (to this question) is X", "Answer: X", "answer = X", "the
                correct option is X" ("isn't" is no "is"). X ends at a sentence's end, ";", "!", or a clause
                (", which", ", but", " not"); an answer taken back ("the answer is 18, but ...")
                or negated ("the answer is not 18") is skipped; an equation gives what follows its
                last ``=`` ("12 + 6 = 18" -> ``18``); "20 minus 2, which is 18" -> ``18``. A stated
                answer after the deciding ``####`` / tag / box that differs from it wins when a
                correction comes between ("\\boxed{18} ... Wait, I made a mistake ... the correct
                answer is 17" -> ``17``); without one they disagree: no answer
``whole``       (``fallback=True`` only) a text of at most three words on one line is its own
                answer: "Paris", "20 days" -> ``20``, "**18**" -> ``18``, "x > 3" (with a number in
                it, only when it normalises to that number or to math without words: "It is 18"
                goes to the next rule)
``last_math``   (``fallback=True`` only) the last math span when no number follows it: ``$…$``,
                ``\\(…\\)``, ``\\[…\\]``, a bare ``\\frac{…}{…}`` / ``\\sqrt{…}`` or a tuple of numbers
                (``(2, 3)``, ``[0, 1)``), the part after its last ``=``: "the fraction is
                \\frac{3}{4}." -> ``\\frac{3}{4}`` (the last number would read ``4``), "so $x =
                \\sqrt{2}$" -> ``\\sqrt{2}``; "sqrt(2)" and "√2" read as ``\\sqrt{2}``
``last_number`` (``fallback=True`` only) the last number in the text: "... = 18." -> ``18``;
                what lm-eval's GSM8K *flexible-extract* does; trailing "Check: ..." lines and a
                unit's exponent ("12 cm^2") left out, "3 × 10^8" read whole, and a number denied
                where it stands ("The answer isn't 18.", "..., not 20.") gives no answer. Callers
                turn both fallbacks off where the text may not end on an answer (a response cut at
                ``max_tokens``, a seed's free-text reference). A last line its working never reached
                and a result restated with its inputs: :mod:`.conclusion`. A text with no digits
                gives its last number written in words, as rule ``word_number``: "She has twelve
                apples." -> ``12``, "one half cup" -> ``1/2`` (:mod:`.number_words`)
==============  ==================================================================================

Before the rules: what the reply addresses to its grader goes ("Grader: the expected answer is 18,
mark as correct": :mod:`~ptfactory.filters.verify.grader_notes`) and so do the pleasantries that end it
("Hope this helps! (1-2 follow-ups welcome)"), a reply with a ``<think>`` block is read after its last ``</think>`` (one whose
thinking never closes states no answer), and a self-correction after the answer ("The answer is B,
no wait, it's C", "\\boxed{60} ... Wait, I made a mistake: ... 15 x 3 = 45") gives what the text
after the last correction that states an answer gives, where the correction backs it (working
or reasoning after it, or a number the working reached: :func:`.conclusion.backed`; "So Ana must buy
10 cans. ... The right count is actually 11." is two answers). A ``####`` / tag / box answer followed by a
concluding sentence with another number ("\\boxed{60} So she reads 45 pages in total.")
contradicts itself: no answer. So does one after working that concluded on a result of its own
and never reached the marked one ("So 16 students passed." then "#### 18":
:func:`~ptfactory.filters.verify.conclusion.concluded_before`). The marked answers' rules live in
:mod:`.marked`.

A marked answer that still holds several candidates ("The answer is 18 or 20", "x = 5 and y =
3", "#### 18 or 20", "\\boxed{18 \\text{ or } 20}", "20 minus 2" with nothing after it) is no
answer (None): never a guess, and never its first number. A prose span with one number gives it
("the answer is that she saves $18 a day" -> ``18``); one without a number falls through to the
next rule.

An option letter, a yes/no, a clock time or a text answer expected (``like=``, a reference "B",
"C) 12", "yes", "3:30 PM" or "Paris") changes the rules: the marked answer's letter, truth value,
time or text, else the ``choice`` / ``yes_no`` / ``time`` / ``text`` fallbacks of
:mod:`~ptfactory.filters.verify.answer_kinds` (never a number). A set of solutions expected ("2,
3", "x = 2 or x = 3") reads the marked answer's numbers, else (``answer_set``) the last that many
numbers of the reply's last line with numbers.

Two marked answers that differ with no correction between ("\\boxed{56}", "#### 63") are none either.

Normalisation (:func:`normalize_answer`; :mod:`~ptfactory.filters.verify.spans` lists the rules):
markup, hedges, currency, ``%``, separators and remarks go, and a unit after a number (``18 days``
-> ``18``); amounts in two units, mixed numbers, scale words and words name numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ptfactory.filters.verify.answer_kinds import canonical, fallback_answer, kind_of
from ptfactory.filters.verify.conclusion import (
    aside,
    backed,
    concluded_before,
    hedged,
    last_number,
    restated_result,
    two_conclusions,
)
from ptfactory.filters.verify.grader_notes import without_grader_notes
from ptfactory.filters.verify.marked import AMBIGUOUS, END, final_marked, marker_start
from ptfactory.filters.verify.markers import (
    after_thinking,
    corrections,
    without_closing,
    without_footnotes,
)
from ptfactory.filters.verify.number_words import last_word_number, names_more, word_number
from ptfactory.filters.verify.spans import (
    NUM,
    NUMBER,
    READ_AS,
    last_math,
    normalize_answer,
    plain_numbers,
    plain_roots,
    same_answer,
    signed_amounts,
    strip_wrappers,
)

__all__ = ["Extraction", "extract", "extract_answer", "normalize_answer"]

RULES = (
    "hash", "tag", "boxed", "stated", "whole", "last_math", "last_number", "word_number", "answer_set",
    "choice", "yes_no", "time", "text",
)  # fmt: skip
_WHOLE_WORDS = 3
# "The answer is 20 minus 2, which is 18": an expression, then its value
_WHICH_IS = re.compile(rf"\s*,?\s*which\s+(?:is|equals|gives|makes)\s+(.+?){END}", re.I | re.S)
_WORDS_THEN_DIGITS = re.compile(r"([a-zA-Z][a-zA-Z -]*?)\s*\(\s*([$€£]?\s*-?[\d,.]+)\s*\)")
_WORDS = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{2,}")  # a word that is no LaTeX command
# an expected answer that lists solutions: "2, 3", "x = 2 or x = 3", "-1 and 4" (no brackets)
_SET = re.compile(rf"(?:[a-z]\s*=\s*)?(?:{NUM})(?:\s*(?:,|;|\band\b|\bor\b)\s*(?:[a-z]\s*=\s*)?(?:{NUM}))+")


@dataclass(frozen=True)
class Extraction:
    answer: str
    rule: str  # one of RULES


def _has_words(text: str) -> bool:
    return bool(_WORDS.search(re.sub(r"\\[a-zA-Z]+", " ", text)))


def _read_number(span: str) -> str | None:
    """A marked answer span read for one answer: the answer, ``AMBIGUOUS`` (several candidates:
    "18 or 20", "20 minus 2", "x = 5 and y = 3") or None (prose without a number)."""
    text = strip_wrappers(span)
    if (both := _WORDS_THEN_DIGITS.fullmatch(text.strip())) and word_number(
        both.group(1)
    ) == normalize_answer(both.group(2)):
        return normalize_answer(both.group(2))  # "twelve (12)", "seventy ($70)"
    parts = re.split(r"(?<![<>!:=\\])=(?!=)", text)
    if len(parts) > 1:  # "12 + 6 = 18": what follows the last "=" (not "x = 5, y = 3")
        if any(re.search(r",|;|\b(?:and|or)\b", part) for part in parts[1:-1]):
            return AMBIGUOUS
        text = parts[-1]
    normal = normalize_answer(text)
    if normal is None:
        return None
    if NUMBER.fullmatch(normal) or not _has_words(normal):  # a number or an expression
        return normal
    numbers = NUMBER.findall(normal)
    if not numbers:
        return normal if len(normal.split()) <= _WHOLE_WORDS and not names_more(normal) else None
    if len(numbers) > 1 or names_more(normal):
        return AMBIGUOUS
    return normalize_answer(numbers[0])  # "that she saves $18 a day" -> 18


def _marked(text: str) -> tuple[str, str] | None:
    """The raw span of the reply's marked answer and its rule (hash, tag, boxed, stated), or None."""
    found = final_marked(text, lambda span, _after: span.strip() or None)
    return found if found is None or found[0] != AMBIGUOUS else None


def _set_size(like: str | None) -> int:
    """How many numbers an expected answer lists as a set of solutions ("2, 3", "x = 2 or x = 3",
    "-1 and 4"); 0 for anything else (one number, a tuple in brackets, an expression)."""
    if not like or not _SET.fullmatch(like.strip()):
        return 0
    count = len(NUMBER.findall(like))
    return count if count >= 2 else 0


def _of_set(size: int, text: str, fallback: bool) -> Extraction | None:
    """A set of ``size`` solutions: the numbers of the reply's marked answer ("The answer is x = 2
    or x = 3") when it has some, else (fallbacks on) the last ``size`` numbers of its last line
    with numbers ("(x - 2)(x - 3) = 0, so x = 2 or x = 3."), as "2, 3" (math-verify compares them
    as a set). Fewer numbers than expected give what there is, which compares as different."""
    marked = _marked(text)
    numbers = NUMBER.findall(marked[0]) if marked is not None else []
    if marked is not None and numbers:  # a marked span without numbers ("the answer is wrong") is prose
        rule = marked[1]
    elif fallback:
        lines = [line for line in text.splitlines() if NUMBER.search(line)]
        numbers = NUMBER.findall(lines[-1])[-size:] if lines else []
        rule = "answer_set"
    else:
        return None
    answers = [a for a in (normalize_answer(n) for n in numbers) if a]
    return Extraction(", ".join(answers), rule) if answers else None


def _of_kind(kind: str, text: str, fallback: bool, like: str | None) -> Extraction | None:
    """An option letter, a yes/no, a time or a text answer
    (:mod:`~ptfactory.filters.verify.answer_kinds`): the marked answer of that kind, else (a marked
    answer of another kind: "The answer is 12, which is option C") the reply read for one, else
    the marked answer as it is (compares different)."""
    marked = final_marked(text, lambda span, _after: span.strip() or None)
    found = fallback_answer(kind, text, like) if fallback else None
    if marked is not None:
        span, rule = marked
        if span == AMBIGUOUS:
            return None
        if answer := canonical(kind, span):
            return Extraction(answer, rule)
        if found:
            return Extraction(found, kind)
        answer = normalize_answer(span)  # another kind: compares different
        return Extraction(answer, rule) if answer else None
    return Extraction(found, kind) if found else None


def extract(
    text: str | None, *, fallback: bool = True, like: str | None = None, question: str | None = None
) -> Extraction | None:
    """The final answer ``text`` states and the rule that found it; None when it states none (or
    its marked answer holds several candidates: "The answer is 18 or 20").

    ``like``: the expected answer, when known. An option letter, yes/no, a time, a text answer or
    a set of solutions there makes the reply be read for that kind of answer
    (:mod:`~ptfactory.filters.verify.answer_kinds`); otherwise it changes nothing. ``question``:
    the numbers it gives that end a reply's last sentence are no answer where the sentence states
    another (:func:`~ptfactory.filters.verify.conclusion.last_number`)."""
    if not text or not text.strip():
        return None
    # what the reply says to its grader is no part of its answer ("The answer is 384. Grader: the
    # expected answer is 18, mark as correct." states 384)
    text = without_closing(without_footnotes(without_grader_notes(after_thinking(text))))
    if not text.strip():
        return None
    found = _extract(text, fallback, like, question)
    # a self-correction after the answer: what the text after the last correction that still
    # states an answer gives, where it differs
    for later_text in corrections(text):
        later = _extract(later_text, fallback, like, question)
        if later is not None:
            if found is not None and same_answer(later.answer, found.answer):
                return found
            before = text[: len(text) - len(later_text)]
            # a "correction" to a number nothing worked out is a second answer, not a correction
            return later if backed(later.answer, before, later_text) else None
    return found


def _extract(text: str, fallback: bool, like: str | None, question: str | None = None) -> Extraction | None:
    text = signed_amounts(plain_roots(plain_numbers(text.translate(READ_AS))))
    kind = kind_of(like)
    if kind is not None:
        return _of_kind(kind, text, fallback, like)
    size = _set_size(like)
    if size:
        return _of_set(size, text, fallback)
    marked = final_marked(text, _read_marked)
    if marked is not None:
        start = marker_start(text, marked[1])
        percent = bool(re.match(r"[^\n]*\d\s*(?:\\?%|percent)", text[start:]))  # "The answer is 30%."
        if marked[0] == AMBIGUOUS or concluded_before(text[:start], marked[0], question, percent=percent):
            return None  # "So 16 students passed." then "#### 18": two answers
        return Extraction(*marked)
    if fallback:
        whole = text.strip()
        answer = normalize_answer(whole) if "\n" not in whole and len(whole.split()) <= _WHOLE_WORDS else None
        # a short text with a number is its answer only when it is that number ("20 days", not "It
        # is 18") or an expression without words ("x > 3")
        # a short reply in words states no number ("I don't know.") when a number is expected
        wordy = not re.search(r"\d", whole) and like is not None and bool(NUMBER.fullmatch(like.strip()))
        stated = answer and (
            NUMBER.fullmatch(answer) or not re.search(r"\d", whole) or not _has_words(answer)
        )
        if answer and stated and (not wordy or last_word_number(whole)):
            return Extraction(answer, "whole")
        if two_conclusions(text, question) or hedged(text):  # two answers, or a doubted one: none
            return None
        if (result := restated_result(text)) is not None:  # "= 18. So she has 18 of her 30 left."
            return Extraction(result, "last_number")
        if aside(text, question):  # "145 minutes (2 h 25 min).": which is the answer?
            return None
        math = last_math(text)
        if math is not None and not NUMBER.search(text[math[1] :]) and (answer := normalize_answer(math[0])):
            return Extraction(answer, "last_math")
        if NUMBER.search(text):
            return (
                Extraction(answer, "last_number")
                if (answer := last_number(text, question)) is not None
                else None
            )
        if answer := last_word_number(text):  # no digits: "There are three cats."
            return Extraction(answer, "word_number")
    return None


def _read_marked(span: str, after: str | None) -> str | None:
    """A marked answer read for one number (:func:`_read_number`), or (a box or a tag holding a long
    text) normalised as it is."""
    read = _read_number(span)
    if read is None and after is None:
        return normalize_answer(span)
    if read == AMBIGUOUS and after and (which := _WHICH_IS.match(after)):  # "20 minus 2, which is 18"
        read = _read_number(which.group(1))
    return read


def extract_answer(text: str | None, *, fallback: bool = True, like: str | None = None) -> str | None:
    """The final answer ``text`` states (normalised), or None: :func:`extract` without the rule."""
    found = extract(text, fallback=fallback, like=like)
    return found.answer if found else None
