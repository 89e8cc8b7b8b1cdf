"""Numbers written as English words: "twelve", "twenty-five", "three hundred and four".

A small model often writes a count in words ("She has twelve apples."); without this the answer
extractor finds no number there and calls the reply ``no_answer``, and a stated answer "The
answer is twelve" compares as the text "twelve" against a reference 12. The extractor reads
words only where a reply has no number in digits (:func:`last_word_number`) or a span is one
number-word phrase (:func:`word_number`), so "one of them" in a reply that computes 18 changes
nothing. A fraction in words is a fraction, never its numerator: "one half", "a half", "a quarter",
"two thirds", "three-fourths" (``1/2``, ``1/2``, ``1/4``, ``2/3``, ``3/4``), and "three and a half"
is ``7/2``; an ordinal alone ("the third day") and "a dozen" are left out: they read as counts too
easily where they are not. :func:`joins_numbers` tells a unit after a number ("18 apples") from
words that carry more of the answer ("18 dollars and 50 cents", "20 minus 2", "18 or 20").
"""

from __future__ import annotations

import re

__all__ = [
    "FRACTION_WORDS",
    "fraction_of",
    "joins_numbers",
    "last_word_number",
    "names_more",
    "word_number",
    "word_numbers",
]

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
# the denominators of fractions in words ("one half", "two thirds", "three-fourths")
FRACTION_WORDS = {"half": 2, "halves": 2, "quarter": 4, "quarters": 4} | {
    stem + end: value
    for value, stem in enumerate(
        ["third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"], 3
    )
    for end in ("", "s")
}
_DENOMINATOR = "|".join(sorted(FRACTION_WORDS, key=len, reverse=True))
# a phrase of number words joined by spaces, hyphens or "and" ("one hundred and five"), with a
# fraction's denominator after it ("two thirds") or "and a half" ("three and a half")
_PHRASE = re.compile(
    rf"(?<![\w-])(?:minus\s+|negative\s+)?(?:(?:{_WORD}|an?)(?=[\s-]+(?:{_DENOMINATOR})\b)|{_WORD})"
    rf"(?:(?:\s+and\s+|[\s-]+)(?:{_WORD}))*"
    rf"(?:[\s-]+(?:{_DENOMINATOR})|\s+and\s+(?:an?|one)[\s-]+(?:{_DENOMINATOR}))?(?![\w-])",
    re.I,
)
# words after a number that make it part of a longer answer, not its unit: more numbers (in words
# or fractions), arithmetic and the words that join or weigh alternatives
_JOINING = {
    *_VALUES, *_SCALES, *FRACTION_WORDS, "dozen", "and", "or", "plus", "minus", "times", "divided",
    "over", "multiplied", "which", "is", "are", "was", "equals", "equal", "makes", "gives", "not",
    "but", "than", "to", "from", "between", "point", "nor", "versus", "vs", "then", "so",
}  # fmt: skip


def joins_numbers(rest: str) -> bool:
    """Do the words ``rest`` after a number carry more numbers or arithmetic ("dollars and 50
    cents", "minus 2", "and a half", "or 20", "hours 30 minutes")? Then they are no unit."""
    if re.search(r"\d|[=+*×÷<>≈]", rest):
        return True
    return any(word in _JOINING for word in re.findall(r"[a-z]+", rest.lower()))


_MORE = {
    *_VALUES,
    *_SCALES,
    *FRACTION_WORDS,
    "dozen",
    "plus",
    "minus",
    "times",
    "divided",
    "multiplied",
    "or",
}


def names_more(text: str) -> bool:
    """Does ``text`` hold a number in words or arithmetic ("18 dollars and fifty cents", "20 minus
    2", "18 or 20")? A prose span with one number in digits and such words holds several answers."""
    return any(word in _MORE for word in re.findall(r"[a-z]+", text.lower()))


def fraction_of(phrase: str) -> str | None:
    """A number-word phrase as a number: "twelve" -> "12", "two thirds" -> "2/3", "a half" ->
    "1/2", "three and a half" -> "7/2"; None when its words do not make one number."""
    words = [w for w in re.split(r"[\s-]+", phrase.lower().strip()) if w]
    if not words:
        return None
    sign = "-" if words[0] in ("minus", "negative") else ""
    words = words[1:] if sign else words
    if not words or words[-1] not in FRACTION_WORDS:
        value = _value(" ".join(words))
        return None if value is None else f"{sign}{value}"
    bottom = FRACTION_WORDS[words[-1]]
    if len(words) >= 4 and words[-3] == "and" and words[-2] in ("a", "an", "one"):  # three and a half
        whole = _value(" ".join(words[:-3]))
        return None if whole is None else f"{sign}{whole * bottom + 1}/{bottom}"
    top = 1 if words[:-1] in (["a"], ["an"]) else _value(" ".join(words[:-1]))
    if top is None or top == 0:
        return None
    return f"{sign}{top}/{bottom}"


def _value(phrase: str) -> int | None:
    """The integer a number-word phrase names, or None when its words do not make one number
    ("five six" is two numbers; "hundred" alone has no count before it)."""
    words = [w for w in re.split(r"[\s-]+", phrase.lower()) if w and w != "and"]
    if not words or any(
        w not in _VALUES and w not in _SCALES and w not in ("minus", "negative") for w in words
    ):
        return None
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
    if rest and (not re.fullmatch(r"[a-zA-Z][\w .-]*", rest) or joins_numbers(rest)):
        return None  # "twenty minus two", "five or six": more than one number
    return fraction_of(match.group(0))


def last_word_number(text: str) -> str | None:
    """The last number-word phrase of ``text`` as digits ("There are three cats." -> "3"), or None
    (also when it ends a sum in words: "twenty minus two")."""
    for match in reversed(list(_PHRASE.finditer(text))):
        before = text[: match.start()].lower()
        if re.search(r"\b(?:plus|minus|times|divided\s+by|over|multiplied\s+by)\s*$", before) or (
            match.group(0).lower().startswith("minus") and re.search(rf"\b(?:{_WORD})\s*$", before, re.I)
        ):
            return None  # "twenty minus two": arithmetic, not one number
        value = fraction_of(match.group(0))
        if value is not None:
            return value
    return None


def word_numbers(text: str) -> list[str]:
    """Every number-word phrase of ``text`` as digits ("seven cookies, or eight" -> ["7", "8"])."""
    return [value for match in _PHRASE.finditer(text) if (value := fraction_of(match.group(0))) is not None]
