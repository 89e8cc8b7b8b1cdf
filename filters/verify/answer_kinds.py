"""Answers that are not numbers: an option letter ("B", "(C)"), yes/no (or true/false) and a
clock time ("3:30 PM", "15:30").

A multiple-choice or a yes/no question's reference says which kind of answer to look for, and
the number rules of the extractor read such replies wrongly: "Yes, because 17 is prime." marks
no answer, so its last number, 17, would be read and compared with "yes". When the expected
answer is of one of these kinds, :func:`~ptfactory.filters.verify.extract.extract` (given
``like=``) reads the reply for that kind and never falls back to a number:

- the reply's marked answer (``#### B``, ``<answer>``, ``\\boxed{B}``, "the answer is (B)",
  "Answer: C) 42", "The answer is no because...") decides when it has one: its leading letter, or
  its first word for yes/no. A marked answer of another kind ("#### 42") is read as it is, and
  compares as different;
- without one (fallbacks on): for a letter, a reply that is only a letter ("B", "**(B)**"), else
  the one line that opens with an option ("C) Venus", "(B) 12 km"), else "option B", "choice B"
  or "(B)" on the reply's last line when that line names one letter alone (a reply that restates
  the options opens several lines, or names several: no answer); for yes/no, the reply's first word
  ("Yes, because...", "No. 21 = 3 x 7"); for a time, the last time the reply writes ("They meet
  at 3:30 PM." -- its last number would read 30).

They compare as text, without math-verify (which reads "B" as a symbol, "True" as sympy's
``true`` and "3:30 PM" as a product of symbols): the same letter, the same truth value (``true``
is ``yes``, ``false`` is ``no``), or the same time of day (``3:30 PM`` is ``15:30``; a time written
without AM/PM, "3:30", matches either half of the day, :func:`same`).
"""

from __future__ import annotations

import re

__all__ = ["KINDS", "canonical", "fallback_answer", "kind_of", "same"]

KINDS = ("choice", "yes_no", "time")
_WRAP = "*_` \t\n"
_BARE_LETTER = re.compile(r"\(?([A-Ja-j])\)?\.?")
# a marked answer that starts with a letter: "(B)...", "C) 42", "D.", "B because ..."
_LEADING = re.compile(r"^(?:\(([A-J])\)|([A-J])(?=$|[).:,;]|\s+(?:because|since|as|is)\b))")
_NAMED = re.compile(r"\b(?:option|choice)\s+\(?([A-J])\)?(?!\w)|\(([A-J])\)")
_OPENS = re.compile(r"^\(?([A-J])[).:]\s")
_TRUTH = {"yes": "yes", "no": "no", "true": "yes", "false": "no"}
_FIRST_WORD = re.compile(r"^[*_`\s\"'(]*([A-Za-z]+)\b")
# a clock time: "3:30", "15:30", "3:30 PM", "3:30 p.m."; not a ratio's "3:2" (minutes take two digits)
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])(?:\s*([ap])\.?\s?m\b\.?)?", re.I)
_HALF_DAY = "~"  # a canonical time without AM/PM ends in it: "03:30~" matches 03:30 and 15:30


def kind_of(expected: str | None) -> str | None:
    """``choice`` for an option letter ("B", "(b)", "B)"; not a bare "e"), ``yes_no`` for yes/no/true/false (any
    case), ``time`` for a clock time ("3:30 PM", "15:30"), else None: a number, an expression or
    another word keeps the extractor's usual rules."""
    text = (expected or "").strip(_WRAP)
    # a lower-case letter only with a bracket: a bare "e" or "a" is more likely math (Euler's e)
    if _BARE_LETTER.fullmatch(text) and (text.strip("().").isupper() or ")" in text):
        return "choice"
    if text.rstrip(".").lower() in _TRUTH:
        return "yes_no"
    if _TIME.fullmatch(text):
        return "time"
    return None


def canonical(kind: str, answer: str) -> str | None:
    """``answer`` (a reference, or a reply's marked answer) as ``kind`` compares it: the letter
    upper-cased, ``yes``/``no``, or a time as :func:`_clock` writes it; None when it is not of that
    kind."""
    text = answer.strip(_WRAP)
    if kind == "choice":
        bare = _BARE_LETTER.fullmatch(text)
        if bare:
            return bare.group(1).upper()
        lead = _LEADING.match(text)
        return next(g for g in lead.groups() if g) if lead else None
    if kind == "time":
        time = _TIME.search(text)
        return _clock(time) if time else None
    word = _FIRST_WORD.match(text)
    return _TRUTH.get(word.group(1).lower()) if word else None


def _clock(time: re.Match[str]) -> str:
    """A time as ``HH:MM`` on a 24-hour clock, with ``~`` when it does not say which half of the
    day (no AM/PM and an hour from 1 to 12)."""
    hour, minute, half = int(time.group(1)), time.group(2), (time.group(3) or "").lower()
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


def fallback_answer(kind: str, text: str) -> str | None:
    """The answer of ``kind`` a reply with no marked answer gives (the module doc), or None."""
    if kind == "yes_no":
        return canonical(kind, text)
    if kind == "time":
        times = list(_TIME.finditer(text))
        return _clock(times[-1]) if times else None
    bare = _BARE_LETTER.fullmatch(text.strip(_WRAP))
    if bare:
        return bare.group(1).upper()
    lines = [line for line in text.strip().splitlines() if line.strip()]
    # a reply that opens a line with one option ("C) Venus"); several such lines restate the options
    opened = {m.group(1) for line in lines if (m := _OPENS.match(line.strip(_WRAP)))}
    if len(opened) == 1:
        return opened.pop()
    named = {next(g for g in m.groups() if g) for m in _NAMED.finditer(lines[-1])} if lines else set()
    return named.pop() if len(named) == 1 else None
