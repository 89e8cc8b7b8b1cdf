"""Answers that are not numbers: an option letter ("B", "(C)", "C) 12"), yes/no (or true/false),
a clock time ("3:30 PM", "15:30") and text ("Paris", "Pacific Ocean").

A multiple-choice, a yes/no or a text question's reference says which kind of answer to look for,
and the number rules of the extractor read such replies wrongly: "Yes, because 17 is prime." marks
no answer, so its last number, 17, would be read and compared with "yes". When the expected
answer is of one of these kinds, :func:`~ptfactory.filters.verify.extract.extract` (given
``like=``) reads the reply for that kind and never falls back to a number:

- the reply's marked answer (``#### B``, ``<answer>``, ``\\boxed{\\textbf{(B)}}``, "the answer is
  (B)", "the answer is option B", "The correct option is C) 42", "The answer is no because...",
  ``\\boxed{3:30 \\text{ PM}}``) decides when it is of that kind: its leading letter (one letter
  alone: "(B) or (C)" is none), its first word for yes/no, its time, or its text. A marked answer
  of another kind ("The answer is 12, which is option C") gives way to the fallback below, and
  without one is read as it is (compares as different);
- without one (fallbacks on): for a letter, a reply that is only a letter ("B", "**(B)**"), else
  the one line that opens with an option ("C) Venus", "(B) 12 km"), else "option B", "choice B"
  or "(B)" on the reply's last line when that line names one letter alone (a reply that restates
  the options opens several lines, or names several: no answer), else "it's B" ending it; for
  yes/no, the reply's first word ("Yes, because...", "No. 21 = 3 x 7"; a restated "True or
  False?" before it is skipped), else the verdict of its last sentence ("..., so yes.", "The
  statement is false because ..."), else of its first; a sentence that answers both ways or
  negates the word ("it is not true") gives none; for a time, the last time the reply writes ("They
  meet at 3:30 PM." -- its last number would read 30; "in the afternoon" / "in the morning" say
  the half of the day); for text, the reference as a phrase of the reply's final sentence right
  after "is" at its end or before "is" at its start ("The capital of France is Paris.", "It's
  blue.", "Amy is older."), only when that sentence has no negation, alternative or comparison
  ("It is not Paris; it is Lyon.", "Amy is older than May." give none), else a reply of at most
  three words on one line as its own answer.

They compare as text, without math-verify (which reads "B" as a symbol, "True" as sympy's
``true``, "3:30 PM" and "May" as products of symbols, so "May" equalled "Amy"): the same letter,
the same truth value (``true`` is ``yes``, ``false`` is ``no``), the same time of day (``3:30 PM``
is ``15:30``; a time written without AM/PM, "3:30", matches either half of the day, :func:`same`),
or the same text (:func:`text_form`: case, punctuation and the articles a, an, the aside).
"""

from __future__ import annotations

import re

__all__ = ["KINDS", "canonical", "fallback_answer", "is_text", "kind_of", "same", "text_form"]

KINDS = ("choice", "yes_no", "time", "text")
_WRAP = "*_` \t\n"
_BARE_LETTER = re.compile(r"\(?([A-Ja-j])\)?\.?")
# an option with its text as the reference: "C) 12", "(A) 12"
_OPTION = re.compile(r"\(?([A-J])\)\s+\S.*", re.S)
# a marked answer that starts with a letter: "(B)...", "C) 42", "D.", "B because ..."
_LEADING = re.compile(r"^(?:\(([A-J])\)|([A-J])(?=$|[).:,;]|\s+(?:because|since|as|is)\b))")
_NAMED = re.compile(r"\b(?:option|choice)\s+\(?([A-J])\)?(?!\w)|\(([A-J])\)")
_OPENS = re.compile(r"^\(?([A-J])[).:]\s")
_IT_IS = re.compile(r"\b(?:is|it's)\s+\(?([A-J])\)?[.!]?$")  # "I think it's B."
# "C is correct because ...", "(B) is the right answer"
_IS_CORRECT = re.compile(r"(?<![\w'])\(?([A-J])\)?\s+is\s+(?:the\s+)?(?:correct|right)\b")
_TRUTH = {"yes": "yes", "no": "no", "true": "yes", "false": "no"}
_FIRST_WORD = re.compile(r"^[*_`\s\"'(]*([A-Za-z]+)\b")
# a clock time: "3:30", "15:30", "3:30 PM", "3:30 p.m."; not a ratio's "3:2" (minutes take two digits)
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])(?:\s*([ap])\.?\s?m\b\.?)?", re.I)
# the half of the day in words: "3:30 in the afternoon"
_DAY_HALF = re.compile(r"\s*(?:o'clock\s*)?in\s+the\s+(?:(afternoon|evening)|(morning))\b", re.I)
_SHORT = 3  # words: a reply this short is its own answer (the extractor's "whole" rule)
_HALF_DAY = "~"  # a canonical time without AM/PM ends in it: "03:30~" matches 03:30 and 15:30
# LaTeX around words: "\text{Yes}", "\textbf{(B)}", "3:30 \text{ PM}"
_LATEX_TEXT = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox)\s*\{([^{}]*)\}")
# a restated question before the verdict: "True or False? The statement is false ..."
_ASKED = re.compile(r"^\W*(?:true\s*(?:or|/)\s*false|yes\s*(?:or|/)\s*no)\b\W*", re.I)
# a verdict word in a sentence: at its start ("No, 21 = 3 x 7"), after "so" ("so yes"), after a
# copula ("the statement is false") or at its end ("So yes.")
_VERDICTS = (
    re.compile(
        r"^\W*(yes|no|true|false)\b(?=\s*(?:[,.!:;)\-–—]|$)|\s+(?:because|since|as|it|this|that|he|she|they|we|you|i)\b)",
        re.I,
    ),
    re.compile(r"\b(?:so|thus|therefore|hence)\s*,?\s+(?:the\s+answer\s+is\s+)?(yes|no|true|false)\b", re.I),
    re.compile(r"\b(?:is|are|was|were|be|it's)\s+(true|false)\b", re.I),
    re.compile(r"\b(yes|no|true|false)\W*$", re.I),
)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
# words of the final sentence that make a text answer in it unsafe to read: a negation, an
# alternative, a comparison, a question
_UNSURE = re.compile(
    r"\b(?:not|no|never|neither|nor|or|than|but|instead|rather|unlike|except|versus|vs|if|whether)\b|n't\b|\?"
)
# words that math writes as words (math-verify reads them): not text answers
_MATH_WORDS = {
    "sqrt", "pi", "sin", "cos", "tan", "sec", "csc", "cot", "arcsin", "arccos", "arctan", "sinh",
    "cosh", "tanh", "log", "ln", "exp", "lim", "inf", "infty", "infinity", "mod", "gcd", "lcm",
    "max", "min", "det", "deg", "and", "or",
}  # fmt: skip


def is_text(answer: str) -> bool:
    """Is an answer text, not math: a word of three letters or more outside LaTeX commands that is
    no math name ("Paris", "May", "\\text{blue}"; not "2\\pi", "sqrt(2)", "x > 3")?"""
    plain = re.sub(r"\\[a-zA-Z]+", " ", answer)
    return any(word.lower() not in _MATH_WORDS for word in re.findall(r"[a-zA-Z]{3,}", plain))


def text_form(answer: str) -> str:
    """A text answer as it compares: lower case, LaTeX text boxes opened, punctuation and the
    articles a, an, the dropped ("The Pacific Ocean." -> "pacific ocean")."""
    text = _LATEX_TEXT.sub(r" \1 ", answer).lower().replace("\u2019", "'")
    words = re.findall(r"[a-z0-9]+(?:[.'][a-z0-9]+)*", text)
    return " ".join(w for w in words if w not in ("a", "an", "the"))


def kind_of(expected: str | None) -> str | None:
    """``choice`` for an option letter ("B", "(b)", "B)", "C) 12"; not a bare "e"), ``yes_no`` for
    yes/no/true/false (any case), ``time`` for a clock time ("3:30 PM", "15:30"), ``text`` for words
    (:func:`is_text`: "Paris", "Pacific Ocean"), else None: a number or an expression keeps the
    extractor's usual rules."""
    text = (expected or "").strip(_WRAP)
    # a lower-case letter only with a bracket: a bare "e" or "a" is more likely math (Euler's e)
    if _BARE_LETTER.fullmatch(text) and (text.strip("().").isupper() or ")" in text):
        return "choice"
    if _OPTION.fullmatch(text):
        return "choice"
    if text.rstrip(".").lower() in _TRUTH:
        return "yes_no"
    if _TIME.fullmatch(text):
        return "time"
    if text and is_text(text):
        return "text"
    return None


def canonical(kind: str, answer: str) -> str | None:
    """``answer`` (a reference, or a reply's marked answer) as ``kind`` compares it: the letter
    upper-cased, ``yes``/``no``, a time as :func:`_clock` writes it, or :func:`text_form`; None
    when it is not of that kind."""
    text = _LATEX_TEXT.sub(r" \1 ", answer).strip(_WRAP + "$")
    if kind == "text":
        return text_form(text) or None
    if kind == "choice":
        text = re.sub(r"^(?:option|choice)\s+", "", text, flags=re.I).strip(_WRAP)
        bare = _BARE_LETTER.fullmatch(text)
        if bare:
            return bare.group(1).upper()
        lead = _LEADING.match(text)
        letter = next(g for g in lead.groups() if g) if lead else None
        others = {next(g for g in m.groups() if g) for m in _NAMED.finditer(text)} - {letter}
        return None if others else letter  # "(B) or (C)" names two
    if kind == "time":
        time = _TIME.search(text)
        return _clock(time, text) if time else None
    word = _FIRST_WORD.match(text)
    return _TRUTH.get(word.group(1).lower()) if word else None


def _clock(time: re.Match[str], text: str) -> str:
    """A time as ``HH:MM`` on a 24-hour clock, with ``~`` when it does not say which half of the
    day (no AM/PM, no "in the afternoon", and an hour from 1 to 12)."""
    hour, minute, half = int(time.group(1)), time.group(2), (time.group(3) or "").lower()
    if not half and 1 <= hour <= 12 and (words := _DAY_HALF.match(text, time.end())):
        half = "p" if words.group(1) else "a"
    if half:
        return f"{hour % 12 + (12 if half == 'p' else 0):02d}:{minute}"
    return f"{hour:02d}:{minute}" + (_HALF_DAY if 1 <= hour <= 12 else "")


def same(kind: str, expected: str, found: str) -> bool:
    """Do two canonical answers of ``kind`` agree? Equal text, except that a time without AM/PM
    matches the same clock reading in either half of the day ("3:30" and "15:30")."""
    if kind != "time" or _HALF_DAY not in expected + found:
        return expected == found

    def minutes(value: str) -> int:
        hour, minute = value.rstrip(_HALF_DAY).split(":")
        return (int(hour) % 12) * 60 + int(minute)

    return minutes(expected) == minutes(found)


def _verdict(sentence: str, patterns: tuple[re.Pattern[str], ...] = _VERDICTS) -> str | None:
    """The one truth value a sentence's verdict words give, or None (none, several, or negated:
    "it is not true")."""
    found = set()
    for pattern in patterns:
        for match in pattern.finditer(sentence):
            if re.search(r"(?:\bnot|n't|\bnever)\s*$", sentence[: match.start(1)], re.I):
                return None
            found.add(_TRUTH[match.group(1).lower()])
    # "Yes and no.": a sentence that answers both ways ("no" before a noun is no answer: "no even factor")
    both = {_TRUTH[w.lower()] for w in re.findall(r"\b(yes|true|false|no(?=\W*$|\s*[,.;!]))", sentence, re.I)}
    return found.pop() if len(found) == 1 and len(both | found) == 1 else None


def _yes_no(text: str) -> str | None:
    """A reply's yes/no: its first word when that is one (after a restated "True or False?"), else
    the verdict of its last sentence, else of its first."""
    body = _ASKED.sub("", _LATEX_TEXT.sub(r" \1 ", text).strip(_WRAP), count=1)
    sentences = [s for s in _SENTENCES.split(body.strip()) if s.strip()]
    if not sentences:
        return None
    first = _verdict(sentences[0], _VERDICTS[:1])
    return first or _verdict(sentences[-1]) or _verdict(sentences[0])


def _text_answer(text: str, like: str | None) -> str | None:
    """A text reference the reply's final sentence states ("The capital of France is Paris.", "It's
    blue.", "Amy is older."): the reference as a whole phrase right after "is" at the sentence's
    end, or before "is" at its start, or the whole sentence, and nothing that negates, compares or
    offers another answer ("It is not Paris; it is Lyon.", "Amy is older than May." give none). A
    reply of at most three words on one line is its own answer ("Lyon", "Paris.")."""
    expected = text_form(like or "")
    sentences = [s for s in _SENTENCES.split(text.strip()) if s.strip()]
    if expected and sentences and not _UNSURE.search(sentences[-1].lower()):
        last, name = text_form(sentences[-1]), re.escape(expected)
        copula = r"(?:is|are|was|were|be|\S+'s|equals|called|named)"
        if last == expected or re.fullmatch(rf"(?:.* )?{copula} {name}|{name} {copula}\b.*", last):
            return expected
    if "\n" not in text.strip() and len(text.split()) <= _SHORT:  # "Lyon": a short reply is its answer
        return text_form(text) or None
    return None


def fallback_answer(kind: str, text: str, like: str | None = None) -> str | None:
    """The answer of ``kind`` a reply with no marked answer gives (the module doc), or None."""
    if kind == "yes_no":
        return _yes_no(text)
    if kind == "text":
        return _text_answer(text, like)
    if kind == "time":
        plain = _LATEX_TEXT.sub(r" \1 ", text)
        times = list(_TIME.finditer(plain))
        return _clock(times[-1], plain) if times else None
    bare = _BARE_LETTER.fullmatch(text.strip(_WRAP))
    if bare:
        return bare.group(1).upper()
    lines = [line for line in text.strip().splitlines() if line.strip()]
    # a reply that opens a line with one option ("C) Venus"); several such lines restate the options
    opened = {m.group(1) for line in lines if (m := _OPENS.match(line.strip(_WRAP)))}
    if len(opened) == 1:
        return opened.pop()
    correct = {m.group(1) for m in _IS_CORRECT.finditer(text)}
    if len(correct) == 1:
        return correct.pop()
    named = {next(g for g in m.groups() if g) for m in _NAMED.finditer(lines[-1])} if lines else set()
    if len(named) == 1:
        return named.pop()
    it_is = _IT_IS.search(lines[-1].strip(_WRAP)) if lines and not named else None
    return it_is.group(1) if it_is else None
