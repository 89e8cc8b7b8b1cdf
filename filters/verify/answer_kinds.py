"""Answers that are not numbers: an option letter ("B", "(C)") and yes/no (or true/false).

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
  ("Yes, because...", "No. 21 = 3 x 7").

Both compare as text, without math-verify (which reads "B" as a symbol and "True" as sympy's
``true``): the same letter, or the same truth value (``true`` is ``yes``, ``false`` is ``no``).
"""

from __future__ import annotations

import re

__all__ = ["KINDS", "canonical", "fallback_answer", "kind_of"]

KINDS = ("choice", "yes_no")
_WRAP = "*_` \t\n"
_BARE_LETTER = re.compile(r"\(?([A-Ja-j])\)?\.?")
# a marked answer that starts with a letter: "(B)...", "C) 42", "D.", "B because ..."
_LEADING = re.compile(r"^(?:\(([A-J])\)|([A-J])(?=$|[).:,;]|\s+(?:because|since|as|is)\b))")
_NAMED = re.compile(r"\b(?:option|choice)\s+\(?([A-J])\)?(?!\w)|\(([A-J])\)")
_OPENS = re.compile(r"^\(?([A-J])[).:]\s")
_TRUTH = {"yes": "yes", "no": "no", "true": "yes", "false": "no"}
_FIRST_WORD = re.compile(r"^[*_`\s\"'(]*([A-Za-z]+)\b")


def kind_of(expected: str | None) -> str | None:
    """``choice`` for an option letter ("B", "(b)", "B)"; not a bare "e"), ``yes_no`` for yes/no/true/false (any
    case), else None: a number, an expression or another word keeps the extractor's usual rules."""
    text = (expected or "").strip(_WRAP)
    # a lower-case letter only with a bracket: a bare "e" or "a" is more likely math (Euler's e)
    if _BARE_LETTER.fullmatch(text) and (text.strip("().").isupper() or ")" in text):
        return "choice"
    if text.rstrip(".").lower() in _TRUTH:
        return "yes_no"
    return None


def canonical(kind: str, answer: str) -> str | None:
    """``answer`` (a reference, or a reply's marked answer) as ``kind`` compares it: the letter
    upper-cased, or ``yes``/``no``; None when it is not of that kind."""
    text = answer.strip(_WRAP)
    if kind == "choice":
        bare = _BARE_LETTER.fullmatch(text)
        if bare:
            return bare.group(1).upper()
        lead = _LEADING.match(text)
        return next(g for g in lead.groups() if g) if lead else None
    word = _FIRST_WORD.match(text)
    return _TRUTH.get(word.group(1).lower()) if word else None


def fallback_answer(kind: str, text: str) -> str | None:
    """The answer of ``kind`` a reply with no marked answer gives (the module doc), or None."""
    if kind == "yes_no":
        return canonical(kind, text)
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
