"""A stated answer span as the short string to compare (:func:`normalize_answer`), and the number
patterns the extractor shares (:mod:`~ptfactory.filters.verify.extract` describes the rules).

A number followed by words keeps only the number when the words are a unit ("18 days", "12 cm^2",
"45°", "\\text{ km}"); words that carry more numbers or arithmetic are no unit
(:func:`~ptfactory.filters.verify.number_words.joins_numbers`): "18 dollars and 50 cents", "2 hours
30 minutes" and "5 feet 6 inches" are one amount in the first unit (``37/2``, ``5/2``, ``11/2``),
"3 and a half hours" is ``7/2``, and "20 minus 2" or "18 or 20" stay as they are (several numbers:
the extractor does not pick one).
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal
from fractions import Fraction

from ptfactory.filters.verify.number_words import FRACTION_WORDS, joins_numbers, word_number

__all__ = [
    "NUM",
    "NUMBER",
    "READ_AS",
    "all_boxes",
    "balanced",
    "last_math",
    "latex_fractions",
    "normalize_answer",
    "number_value",
    "plain_numbers",
    "plain_roots",
    "same_answer",
    "signed_amounts",
    "strip_wrappers",
]

# a number as people write it: 1.5e6 / -1,234.5 / 3/4 / 1 1/2 (a mixed number) / .5
NUM = (
    r"-?\d+(?:\.\d+)?[eE][+-]?\d+(?![\w.])"
    r"|-?\d+\s+\d+\s*/\s*\d+(?!\s*[\d/])"
    r"|-?(?:\d{1,3}(?:,\d{3})+|\d{1,3}(?:[ \u00a0\u202f']\d{3})+(?![\d/])|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?|-?\.\d+"
)
NUMBER = re.compile(rf"(?<![\w.])(?:{NUM})(?![\d])")
_SCIENTIFIC = re.compile(r"-?\d+(?:\.\d+)?[eE][+-]?\d+")
_MIXED = re.compile(r"(-?)(\d+)\s+(\d+)\s*/\s*(\d+)")
_CURRENCY = re.compile(r"^(?:\\\$|\$|€|£|¥|USD\s*|EUR\s*)\s*")
# thousands grouped by commas, spaces (a no-break or narrow one) or apostrophes: 16,000 / 16 000 / 16'000
_THOUSANDS = re.compile(r"(?<=\d)[, \u00a0\u202f'](?=\d{3}(?![\d/]))")
# a minus before an amount's currency sign ("-$150", "-€150", "negative $150") in running text, not
# a subtraction ("$250 - $100")
_SIGNED_AMOUNT = re.compile(r"(?:(?<![\w).])(?<![\d)%]\s)-\s?|\bnegative\s+)(?:\\?\$|€|£|¥)\s?(?=\d)", re.I)
# what may trail a stated answer: a code span's backtick, a footnote mark, an emoji
_TRAILING_MARKS = re.compile(r"(?:`+|\[\^\w+\]|\s*[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200d]+)+$")
_LEADING_NUMBER = re.compile(rf"^({NUM})(?=$|\s|[a-zA-Z%°\\^])")
_WORDS = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{2,}")  # a word that is no LaTeX command
# math spans: $…$ (not $$), \(…\), \[…\], and a bare \frac / \dfrac / \sqrt with an optional sign
_MATH = re.compile(r"(?<![$\\])\$([^$\n]+?)\$(?!\$)|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
# a tuple or interval of numbers: (2, 3), [0, 1), (-1.5, 4, 7)
_TUPLE = re.compile(rf"[(\[]\s*(?:{NUM})(?:\s*,\s*(?:{NUM}))+\s*[)\]]")
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BARE = re.compile(r"-?\\(?:d?frac|sqrt)\s*\{")
# minus sign, en dash, figure dash; a vulgar fraction as a mixed number's tail ("2½" -> "2 1/2")
READ_AS = str.maketrans(
    {"\u2212": "-", "\u2013": "-", "\u2012": "-", "\u2044": "/", "\u2019": "'"}
    | {c: " " + unicodedata.normalize("NFKC", c).replace("\u2044", "/") for c in "½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞"}
)
# a bold span inside a stated answer ("**12** apples"); "2**10" (a power) has no pair around it
_BOLD = re.compile(r"(?<!\S)(\*\*|__)([^*_\n]+?)\1(?!\S)")
_SCALES = {"hundred": 10**2, "thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
# "about 18", "approximately 3.14": the hedge goes, the number stays
_HEDGE = re.compile(
    r"^(?:about|approximately|approx\.?|around|roughly|exactly|precisely|≈|~)\s*(?=[-$\\\d.])", re.I
)
_SIGN_WORD = re.compile(r"^(?:negative|minus)\s+(?=[$\\]?\d)", re.I)
# what a unit may hold besides letters: LaTeX text boxes, thin spaces, degrees and exponents
_UNIT_MARKUP = re.compile(
    r"\\(?:text|mathrm|mbox|textrm)\s*\{([^{}]*)\}|\\[,;:! ]|(\^\s*\{?\\circ\}?|\\circ|\\degree|°)"
    r"|(?<=[a-zA-Z}])(?:\^\s*\{?\d\}?|[²³])"
)
_UNIT = re.compile(r"[a-zA-Z%][\w/ .%-]*")
# a trailing remark in brackets: "18 (9 eggs x $2)"
_REMARK = re.compile(r"^(.*?\S)\s+\(([^()]*[a-zA-Z]{2,}[^()]*)\)$")
# an expression with a unit after it in a LaTeX text box
_LATEX_UNIT = re.compile(r"^(.*?\S)\s*(\\(?:text|mathrm)\s*\{[^{}]*\}(?:\^\s*\{?\d\}?)?)$")
# one amount in two units: "18 dollars and 50 cents", "2 hours 30 minutes", "5 feet 6 inches"
_PER = {
    ("dollar", "cent"): 100, ("hour", "minute"): 60, ("minute", "second"): 60, ("foot", "inch"): 12,
    ("feet", "inch"): 12, ("yard", "foot"): 3, ("yard", "feet"): 3, ("pound", "ounce"): 16,
    ("meter", "centimeter"): 100, ("metre", "centimetre"): 100, ("kilogram", "gram"): 1000,
    ("kilometer", "meter"): 1000, ("week", "day"): 7, ("day", "hour"): 24, ("year", "month"): 12,
}  # fmt: skip
_COMPOUND = re.compile(r"(\d+)\s*([a-z]+)\s*,?\s*(?:and\s+)?(\d+)\s*([a-z]+)", re.I)
_UNIT_NAMES = {name for pair in _PER for name in pair}
_AND_FRACTION = re.compile(
    rf"(-?\d+)\s+and\s+(?:(an?|one)\s+({'|'.join(FRACTION_WORDS)})|(\d+)\s*/\s*(\d+))\b\s*(.*)", re.I
)


def strip_wrappers(text: str) -> str:
    text = text.strip()
    for _ in range(3):  # "**$18$**." peels in a few rounds
        before = text
        text = text.strip().rstrip(".").strip()
        text = re.sub(r"^(\*\*|__|\*|_|`)(.+)\1$", r"\2", text, flags=re.S).strip()
        if len(text) > 1 and text.startswith("$") and text.endswith("$"):
            text = text.strip("$").strip()
        if text.startswith("\\(") and text.endswith("\\)"):
            text = text[2:-2].strip()
        if text.startswith("\\[") and text.endswith("\\]"):
            text = text[2:-2].strip()
        text = re.sub(r"^\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}$", r"\1", text, flags=re.S).strip()
        if text == before:
            break
    return text


def _is_unit(rest: str) -> bool:
    """Are the words after a number its unit ("days", "km/h", "cm^2", "°", "\\text{ km}")?"""
    plain = _UNIT_MARKUP.sub(lambda m: f" {m.group(1) or ('degrees' if m.group(2) else '')} ", rest).strip()
    return bool(_UNIT.fullmatch(plain)) and not joins_numbers(plain)


def _compound(text: str) -> str | None:
    """One amount in two units as a fraction of the first ("2 hours 30 minutes" -> "5/2"), else None."""
    match = _COMPOUND.fullmatch(text)
    if match is None:
        return None
    first, big, second, small = match.groups()
    per = _PER.get((_singular(big), _singular(small)))
    if per is None or int(second) >= per:
        return None
    value = Fraction(int(first)) + Fraction(int(second), per)
    return str(value)


def _singular(unit: str) -> str:
    unit = unit.lower()
    for cut in (0, 1, 2):  # "hours" -> "hour", "inches" -> "inch"
        if cut < len(unit) and unit[: len(unit) - cut] in _UNIT_NAMES:
            return unit[: len(unit) - cut]
    return unit


def _and_fraction(text: str) -> str | None:
    """ "3 and a half (hours)", "2 and 3/4" as an improper fraction, else None."""
    match = _AND_FRACTION.fullmatch(text)
    if match is None:
        return None
    whole, article, word, top, bottom, rest = match.groups()
    if rest and not _is_unit(rest):
        return None
    fraction = Fraction(1, FRACTION_WORDS[word.lower()]) if article else Fraction(int(top), int(bottom))
    value = int(whole) + (-fraction if whole.startswith("-") else fraction)
    return str(value)


def normalize_answer(span: str) -> str | None:
    """A stated answer span as the short string to compare (the extract module's docstring); None
    if nothing is left."""
    text = strip_wrappers(_BOLD.sub(r"\2", span.translate(READ_AS).strip()))
    text = re.sub(r"^[*_]+\s*|\s*[*_]+$", "", text)  # "**Answer:** 18": the bold's closing half
    text = _TRAILING_MARKS.sub("", text).strip()  # "72`", "$155[^1]", "18 🍎"
    text = _HEDGE.sub("", text)
    text = _SIGN_WORD.sub("-", text)  # "negative 5"
    text = _CURRENCY.sub("", text).strip()
    text = re.sub(r"^-\s*(?:\\\$|\$)", "-", text)  # "-$5"
    text = _THOUSANDS.sub("", text)
    if kilo := re.fullmatch(r"(-?\d+(?:\.\d+)?)[kK]", text):  # "$16k" is 16000
        return format((Decimal(kilo.group(1)) * 1000).normalize(), "f")
    text = re.sub(r"\s*\\?%$", "", text).strip()
    if remark := _REMARK.match(text):  # "18 (9 eggs x $2)": the remark goes
        text = remark.group(1)
    unit = _LATEX_UNIT.match(text)
    if unit and re.search(r"\d", unit.group(1)) and _is_unit(unit.group(2)):  # "\frac{1}{2} \text{ cup}"
        text = unit.group(1)
    if (whole := _compound(text) or _and_fraction(text)) is not None:
        return whole
    number = _LEADING_NUMBER.match(text)
    if number:
        rest = text[number.end() :].strip()
        # "18 days", "5 km/h", "16000 dollars": the unit goes; "3/4 of them" keeps the fraction
        if scaled := _scaled(number.group(1), rest):
            text = scaled
        elif not rest or _is_unit(rest):
            text = _improper(number.group(1))
    text = text.rstrip(".").strip()
    if text and not re.search(r"\d", text) and (words := word_number(text)):  # "twelve apples"
        text = words
    return text or None


def _scaled(number: str, rest: str) -> str | None:
    """A number before a scale word as the number it names ("1 million" -> "1000000", "2.5
    thousand" -> "2500"), else None (the word is a unit, and goes)."""
    word, _, unit = rest.partition(" ")
    if word.lower() not in _SCALES or not re.fullmatch(r"-?\d+(?:\.\d+)?", number):
        return None
    if unit.strip() and not _is_unit(unit):  # "1 million and 5" is no one number
        return None
    return format((Decimal(number) * _SCALES[word.lower()]).normalize(), "f")


def _improper(number: str) -> str:
    """A number as math-verify reads it: a mixed number "1 1/2" as the fraction "3/2" (left as
    it is, its space would join it into 11/2), scientific notation written out ("1.5e6" ->
    "1500000"), other numbers without their spaces."""
    if _SCIENTIFIC.fullmatch(number.strip()):
        return format(Decimal(number.strip()).normalize(), "f")
    mixed = _MIXED.fullmatch(number.strip())
    if mixed is None:
        return re.sub(r"\s+", "", number)
    sign, whole, top, bottom = mixed.groups()
    return f"{sign}{int(whole) * int(bottom) + int(top)}/{bottom}"


def number_value(answer: str) -> Fraction | None:
    """A normalised answer that is a plain number ("18", "-3/4", "2.50") as its value, else None."""
    try:
        return Fraction(answer.replace(" ", "")) if NUMBER.fullmatch(answer) else None
    except (ValueError, ZeroDivisionError):
        return None


def balanced(text: str, start: int) -> str | None:
    """The contents of the brace group opening at ``text[start - 1] == '{'``."""
    depth = 1
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:index]
    return None


def last_math(text: str) -> tuple[str, int] | None:
    """The last math span of ``text`` (its contents) and where it ends."""
    spans: list[tuple[str, int]] = []
    for match in _MATH.finditer(text):
        body = next(g for g in match.groups() if g is not None)
        if not _WORDS.search(body):  # "$5 and gets $" is two prices, not math
            spans.append((body, match.end()))
    for match in _BARE.finditer(text):
        inner = balanced(text, match.end())
        if inner is None:
            continue
        end = match.end() + len(inner) + 1
        if text[match.start() : match.end()].lstrip("-").startswith(("\\frac", "\\dfrac")):
            if not text[end:].lstrip().startswith("{"):
                continue
            start = text.index("{", end) + 1
            second = balanced(text, start)
            if second is None:
                continue
            end = start + len(second) + 1
        spans.append((text[match.start() : end], end))
    spans += [(m.group(0), m.end()) for m in _TUPLE.finditer(text)]
    if not spans:
        return None
    body, end = max(spans, key=lambda span: span[1])
    return body.rsplit("=", 1)[-1].strip(), end


def same_answer(first: str, second: str) -> bool:
    """Two extracted answers that say the same: the same text, or the same number ("18", "18.0")."""
    if first == second:
        return True
    one, two = number_value(first), number_value(second)
    return one is not None and one == two


def all_boxes(text: str) -> list[tuple[str, int]]:
    """The contents of every ``\\boxed{}`` / ``\\fbox{}`` (braces balanced) and where each ends."""
    found = []
    for match in _BOX.finditer(text):
        inner = balanced(text, match.end())
        if inner is not None:
            found.append((inner, match.end() + len(inner) + 1))
    return found


# square roots written as text: "sqrt(2)" (not "math.sqrt(x)") and "√2" read as \sqrt{2}, so the
# last-math rule takes them whole where the last number would read 2
_PLAIN_ROOT = re.compile(r"(?<![\\\w.])sqrt\s*\(([^()\n]*)\)|√\s*(\d+(?:\.\d+)?|\([^()\n]*\))")


def _root(match: re.Match[str]) -> str:
    inner = match.group(1) if match.group(1) is not None else match.group(2).strip("()")
    return f"\\sqrt{{{inner.strip()}}}"


def signed_amounts(text: str) -> str:
    """``text`` with a negative amount's sign beside its number: "-$150", "- €150" and "negative
    $150" read -150, where the number alone would read 150 ("250 - $100" stays a subtraction)."""
    return _SIGNED_AMOUNT.sub("-", text)


def plain_roots(text: str) -> str:
    """``text`` with its square roots written as text ("sqrt(2)", "√2") as ``\\sqrt{2}``."""
    return _PLAIN_ROOT.sub(_root, text)


# LaTeX's thousands separators between digits: "51{,}000", "54\\,500"
_LATEX_GROUP = re.compile(r"(?<=\d)(?:\{,\}|\\[,!;: ])(?=\d)")
# a decimal comma, as in "0,4", "7,5 h", "$77,11", "2 443,75" or "1.250,50" (one or two digits after
# it, no third): not a tuple's "(2,3)" nor a list's "1,2,3"
_DECIMAL_COMMA = re.compile(
    r"(?<![\d,.(\[{])(\d{1,3}(?:[.\u00a0\u202f ]\d{3})+|\d+),(\d{1,2})(?![\d,])(?!\s*[)\]])"
)


def plain_numbers(text: str) -> str:
    """``text`` with numbers written the usual way: LaTeX's "51{,}000" is "51,000", a decimal comma
    a point ("7,5" is 7.5, "1.250,50" 1250.50)."""
    text = _LATEX_GROUP.sub(",", text)
    return _DECIMAL_COMMA.sub(lambda m: re.sub(r"[.]", "", m.group(1)) + "." + m.group(2), text)


_LATEX_FRACTION = re.compile(r"\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}")


def latex_fractions(text: str) -> str:
    """``text`` with LaTeX's fractions of two integers written as numbers: "\\frac{7}{8}" is " 7/8 "."""
    return _LATEX_FRACTION.sub(r" \1/\2 ", text)
