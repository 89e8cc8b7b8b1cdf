"""Numbers written as English words: "twelve", "twenty-five", "three hundred and four".

A small model often writes a count in words ("She has twelve apples."); without this the answer
extractor finds no number there and calls the reply ``no_answer``, and a stated answer "The
answer is twelve" compares as the text "twelve" against a reference 12. The extractor reads
words only where a reply has no number in digits (:func:`last_word_number`) or a span is one
number-word phrase (:func:`word_number`), so "one of them" in a reply that computes 18 changes
nothing. Ordinals ("third"), fractions ("a half") and "a dozen" are left out: they read as counts
too easily where they are not.
"""

from __future__ import annotations

import re

__all__ = ["last_word_number", "word_number"]

_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_VALUES = {word: value for value, word in enumerate(_UNITS)} | {
    word: 20 + 10 * index for index, word in enumerate(_TENS)
}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000}
_WORD = "|".join(sorted([*_VALUES, *_SCALES], key=len, reverse=True))
# a phrase of number words joined by spaces, hyphens or "and" ("one hundred and five")
_PHRASE = re.compile(
    rf"(?<![\w-])(?:minus\s+|negative\s+)?(?:{_WORD})(?:(?:\s+and\s+|[\s-]+)(?:{_WORD}))*(?![\w-])",
    re.I,
)


def _value(phrase: str) -> int | None:
    """The integer a number-word phrase names, or None when its words do not make one number
    ("five six" is two numbers; "hundred" alone has no count before it)."""
    words = [w for w in re.split(r"[\s-]+", phrase.lower()) if w and w != "and"]
    sign = -1 if words and words[0] in ("minus", "negative") else 1
    words = words[1:] if sign < 0 else words
    total = current = 0
    last = None  # the kind of the previous word: "unit", "ten" or "scale"
    for word in words:
        if word in _SCALES:
            if last is None or (last == "scale" and current == 0):
                return None
            scale = _SCALES[word]
            if scale == 100:
                current *= 100
            else:
                total += current * scale
                current = 0
            last = "scale"
            continue
        value = _VALUES[word]
        if value >= 20:  # a ten follows only a scale (or opens the phrase)
            if last in ("unit", "ten"):
                return None
            last = "ten"
        else:  # a unit or a teen follows a scale or a ten below 20s' units (twenty-five)
            if last == "unit" or (last == "ten" and (value >= 10 or current % 10)):
                return None
            last = "unit"
        current += value
    return sign * (total + current) if last is not None else None


def word_number(span: str) -> str | None:
    """The number ``span`` names when it is one number-word phrase, alone or before a unit
    ("twelve", "Twenty-five dollars" -> "25"); else None."""
    match = _PHRASE.match(span.strip())
    if match is None:
        return None
    rest = span.strip()[match.end() :].strip()
    if rest and not re.fullmatch(r"[a-zA-Z][\w .-]*", rest):
        return None
    value = _value(match.group(0))
    return None if value is None else str(value)


def last_word_number(text: str) -> str | None:
    """The last number-word phrase of ``text`` as digits ("There are three cats." -> "3"), or None."""
    for match in reversed(list(_PHRASE.finditer(text))):
        value = _value(match.group(0))
        if value is not None:
            return str(value)
    return None
