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
``hash``        GSM8K's ``#### 18`` (the last such line)
``tag``         the last ``<answer>…</answer>`` block (reasoning-gym's format)
``boxed``       the last ``\\boxed{…}`` / ``\\fbox{…}`` (braces balanced)
``stated``      the last "the (final) answer is X", "Answer: X", "answer = X"
``whole``       (``fallback=True`` only) a text of at most three words on one line is its own
                answer: "Paris", "20 days" -> ``20``, "**18**" -> ``18`` (with a number in it, only
                when it normalises to that number: "It is 18" goes to the next rule)
``last_math``   (``fallback=True`` only) the last math span when no number follows it: ``$…$``,
                ``\\(…\\)``, ``\\[…\\]``, a bare ``\\frac{…}{…}`` / ``\\sqrt{…}`` or a tuple of numbers
                (``(2, 3)``, ``[0, 1)``), the part after its last ``=``: "the fraction is
                \\frac{3}{4}." -> ``\\frac{3}{4}`` (the last number would read ``4``), "so $x =
                \\sqrt{2}$" -> ``\\sqrt{2}``; "sqrt(2)" and "√2" read as ``\\sqrt{2}``
``last_number`` (``fallback=True`` only) the last number in the text: "... = 18." -> ``18``;
                what lm-eval's GSM8K *flexible-extract* does. Callers turn both fallbacks off where
                the text may not end on an answer (a response cut at ``max_tokens``, a seed's
                free-text reference). A text with no number in digits gives its last number
                written in words, as rule ``word_number``: "She has twelve apples." -> ``12``
                (:mod:`~ptfactory.filters.verify.number_words`)
==============  ==================================================================================

An option letter, a yes/no or a clock time expected (``like=``, a reference "B", "yes" or "3:30
PM") changes the rules: the marked answer's letter, first word or time, else the ``choice`` /
``yes_no`` / ``time`` fallbacks of :mod:`~ptfactory.filters.verify.answer_kinds` (never a
number). A set of solutions expected ("2, 3", "x = 2 or x = 3") reads the marked answer's
numbers, else (``answer_set``) the last that many numbers of the reply's last line with numbers.

Normalisation (:func:`normalize_answer`), applied to the span a rule found: markdown emphasis
and surrounding ``$…$`` / ``\\(…\\)`` dropped, currency signs (``$``, ``\\$``, ``€``, ``£``) and a
trailing ``%`` dropped, thousands separators removed (``16,000`` -> ``16000``), a trailing full
stop dropped, and a number followed by words keeps only the number (``18 days`` -> ``18``,
``$16,000 dollars`` -> ``16000``); a mixed number is a fraction (``1 1/2`` -> ``3/2``, ``2½`` too),
a scale word multiplies (``1 million`` -> ``1000000``; the last-number rule reads it too), bold
inside the span goes (``**12** apples`` -> ``12``) and a span that is a number in words is that
number (``twenty-five`` -> ``25``). LaTeX (``\\frac{1}{2}``) and plain text (``yes``) pass through.
A span that states no answer ("the answer is that she earns more") gives its first number, and
without one falls through to the next rule.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal

from ptfactory.filters.verify.answer_kinds import canonical, fallback_answer, kind_of
from ptfactory.filters.verify.number_words import last_word_number, word_number

__all__ = ["Extraction", "extract", "extract_answer", "normalize_answer"]

RULES = (
    "hash", "tag", "boxed", "stated", "whole", "last_math", "last_number", "word_number", "answer_set",
    "choice", "yes_no", "time",
)  # fmt: skip
_WHOLE_WORDS = 3

# a number as people write it: -1,234.5 / 3/4 / 1 1/2 (a mixed number) / .5 / 1e-3 is rare in
# word problems and left out
_NUM = r"-?\d+\s+\d+\s*/\s*\d+(?!\s*[\d/])|-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?|-?\.\d+"
_MIXED = re.compile(r"(-?)(\d+)\s+(\d+)\s*/\s*(\d+)")
_NUMBER = re.compile(rf"(?<![\w.])(?:{_NUM})(?![\d])")
_HASH = re.compile(r"####\s*([^\n]+)")
_TAG = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.S)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_STATED = re.compile(
    r"(?:(?:final|correct)\s+)?answer\s*(?:is|was|would\s+be|will\s+be|:|=)\s*:?\s*(.+?)"
    r"(?=(?:\.\s|\.$|\n|;|,\s+(?:which|because|so|and)\b|$))",
    re.I | re.S,
)
_CURRENCY = re.compile(r"^(?:\\\$|\$|€|£|¥|USD\s*|EUR\s*)\s*")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_LEADING_NUMBER = re.compile(rf"^({_NUM})(?=$|\s|[a-zA-Z%])")
_MAX_SPAN = 200  # a stated "answer" longer than this is prose, not an answer
# math spans: $…$ (not $$), \(…\), \[…\], and a bare \frac / \dfrac / \sqrt with an optional sign
_MATH = re.compile(r"(?<![$\\])\$([^$\n]+?)\$(?!\$)|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
# a tuple or interval of numbers: (2, 3), [0, 1), (-1.5, 4, 7)
_TUPLE = re.compile(rf"[(\[]\s*(?:{_NUM})(?:\s*,\s*(?:{_NUM}))+\s*[)\]]")
_WORDS = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{2,}")  # a word that is no LaTeX command
_BARE = re.compile(r"-?\\(?:d?frac|sqrt)\s*\{")
# square roots written as text: "sqrt(2)" (not "math.sqrt(x)") and "√2" read as \sqrt{2}, so the
# last-math rule takes them whole where the last number would read 2
_PLAIN_ROOT = re.compile(r"(?<![\\\w.])sqrt\s*\(([^()\n]*)\)|√\s*(\d+(?:\.\d+)?|\([^()\n]*\))")
# an expected answer that lists solutions: "2, 3", "x = 2 or x = 3", "-1 and 4" (no brackets)
_SET = re.compile(rf"(?:[a-z]\s*=\s*)?(?:{_NUM})(?:\s*(?:,|;|\band\b|\bor\b)\s*(?:[a-z]\s*=\s*)?(?:{_NUM}))+")
# minus sign, en dash, figure dash; a vulgar fraction as a mixed number's tail ("2½" -> "2 1/2")
_READ_AS = str.maketrans(
    {"\u2212": "-", "\u2013": "-", "\u2012": "-", "\u2044": "/"}
    | {c: " " + unicodedata.normalize("NFKC", c).replace("\u2044", "/") for c in "½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞"}
)
# a bold span inside a stated answer ("**12** apples"); "2**10" (a power) has no pair around it
_BOLD = re.compile(r"(?<!\S)(\*\*|__)([^*_\n]+?)\1(?!\S)")
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_SCALE_AFTER = re.compile(rf"(?:\s+(?:{'|'.join(_SCALES)})\b)?", re.I)


@dataclass(frozen=True)
class Extraction:
    answer: str
    rule: str  # one of RULES


def _strip_wrappers(text: str) -> str:
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
        text = re.sub(r"^\\text\{(.*)\}$", r"\1", text, flags=re.S).strip()
        if text == before:
            break
    return text


def normalize_answer(span: str) -> str | None:
    """A stated answer span as the short string to compare (see the module docstring); None if
    nothing is left."""
    text = _strip_wrappers(_BOLD.sub(r"\2", span.translate(_READ_AS).strip()))
    text = re.sub(r"^[*_]+\s*|\s*[*_]+$", "", text)  # "**Answer:** 18": the bold's closing half
    text = _CURRENCY.sub("", text).strip()
    text = _THOUSANDS.sub("", text)
    text = re.sub(r"\s*\\?%$", "", text).strip()
    number = _LEADING_NUMBER.match(text)
    if number:
        rest = text[number.end() :].strip()
        # "18 days", "5 km/h", "16000 dollars": the unit goes; "3/4 of them" keeps the fraction
        if not rest or re.match(r"^[a-zA-Z%][\w/ .%-]*$", rest) or rest.startswith("\\text"):
            text = _scaled(number.group(1), rest) or _improper(number.group(1))
    text = text.rstrip(".").strip()
    if text and not re.search(r"\d", text) and (words := word_number(text)):  # "twelve apples"
        text = words
    return text or None


def _scaled(number: str, rest: str) -> str | None:
    """A number before a scale word as the number it names ("1 million" -> "1000000", "2.5
    thousand" -> "2500"), else None (the word is a unit, and goes)."""
    word = rest.split(maxsplit=1)[0].lower() if rest else ""
    if word not in _SCALES or not re.fullmatch(r"-?\d+(?:\.\d+)?", number):
        return None
    return format((Decimal(number) * _SCALES[word]).normalize(), "f")


def _improper(number: str) -> str:
    """A number as math-verify reads it: a mixed number "1 1/2" as the fraction "3/2" (left as
    it is, its space would join it into 11/2), other numbers without their spaces."""
    mixed = _MIXED.fullmatch(number.strip())
    if mixed is None:
        return re.sub(r"\s+", "", number)
    sign, whole, top, bottom = mixed.groups()
    return f"{sign}{int(whole) * int(bottom) + int(top)}/{bottom}"


def _balanced(text: str, start: int) -> str | None:
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


def _last_boxed(text: str) -> str | None:
    found = None
    for match in _BOX.finditer(text):
        inner = _balanced(text, match.end())
        if inner is not None:
            found = inner
    return found


def _stated(text: str) -> str | None:
    for match in reversed(list(_STATED.finditer(text))):
        span = match.group(1).strip()
        if not span or len(span) > _MAX_SPAN:
            continue
        normal = normalize_answer(span)
        if normal is None:
            continue
        if _NUMBER.fullmatch(normal) or "\\" in normal or len(normal.split()) <= 3:
            return normal
        numbers = _NUMBER.findall(span)  # "the answer is that she saves $18 a day" -> 18
        if numbers:
            return normalize_answer(numbers[0])
    return None


def _last_math(text: str) -> tuple[str, int] | None:
    """The last math span of ``text`` (its contents) and where it ends."""
    spans: list[tuple[str, int]] = []
    for match in _MATH.finditer(text):
        body = next(g for g in match.groups() if g is not None)
        if not _WORDS.search(body):  # "$5 and gets $" is two prices, not math
            spans.append((body, match.end()))
    for match in _BARE.finditer(text):
        inner = _balanced(text, match.end())
        if inner is None:
            continue
        end = match.end() + len(inner) + 1
        if text[match.start() : match.end()].lstrip("-").startswith(("\\frac", "\\dfrac")):
            if not text[end:].lstrip().startswith("{"):
                continue
            start = text.index("{", end) + 1
            second = _balanced(text, start)
            if second is None:
                continue
            end = start + len(second) + 1
        spans.append((text[match.start() : end], end))
    spans += [(m.group(0), m.end()) for m in _TUPLE.finditer(text)]
    if not spans:
        return None
    body, end = max(spans, key=lambda span: span[1])
    return body.rsplit("=", 1)[-1].strip(), end


def _root(match: re.Match[str]) -> str:
    inner = match.group(1) if match.group(1) is not None else match.group(2).strip("()")
    return f"\\sqrt{{{inner.strip()}}}"


def _marked(text: str) -> tuple[str, str] | None:
    """The raw span of the reply's marked answer and its rule (hash, tag, boxed, stated), or None."""
    hashed, tagged, boxed = _HASH.findall(text), _TAG.findall(text), _last_boxed(text)
    stated = [m.group(1).strip() for m in _STATED.finditer(text) if 0 < len(m.group(1).strip()) <= _MAX_SPAN]
    for rule, span in (
        ("hash", hashed),
        ("tag", tagged),
        ("boxed", [boxed] if boxed else []),
        ("stated", stated),
    ):
        if span and span[-1].strip():
            return span[-1], rule
    return None


def _set_size(like: str | None) -> int:
    """How many numbers an expected answer lists as a set of solutions ("2, 3", "x = 2 or x = 3",
    "-1 and 4"); 0 for anything else (one number, a tuple in brackets, an expression)."""
    if not like or not _SET.fullmatch(like.strip()):
        return 0
    count = len(_NUMBER.findall(like))
    return count if count >= 2 else 0


def _of_set(size: int, text: str, fallback: bool) -> Extraction | None:
    """A set of ``size`` solutions: the numbers of the reply's marked answer ("The answer is x = 2
    or x = 3") when it has some, else (fallbacks on) the last ``size`` numbers of its last line
    with numbers ("(x - 2)(x - 3) = 0, so x = 2 or x = 3."), as "2, 3" (math-verify compares them
    as a set). Fewer numbers than expected give what there is, which compares as different."""
    marked = _marked(text)
    numbers = _NUMBER.findall(marked[0]) if marked is not None else []
    if marked is not None and numbers:  # a marked span without numbers ("the answer is wrong") is prose
        rule = marked[1]
    elif fallback:
        lines = [line for line in text.splitlines() if _NUMBER.search(line)]
        numbers = _NUMBER.findall(lines[-1])[-size:] if lines else []
        rule = "answer_set"
    else:
        return None
    answers = [a for a in (normalize_answer(n) for n in numbers) if a]
    return Extraction(", ".join(answers), rule) if answers else None


def _of_kind(kind: str, text: str, fallback: bool) -> Extraction | None:
    """An option letter or a yes/no answer (:mod:`~ptfactory.filters.verify.answer_kinds`)."""
    marked = _marked(text)
    if marked is not None:
        span, rule = marked
        answer = canonical(kind, span) or normalize_answer(span)  # another kind: compares different
        return Extraction(answer, rule) if answer else None
    found = fallback_answer(kind, text) if fallback else None
    return Extraction(found, kind) if found else None


def extract(text: str | None, *, fallback: bool = True, like: str | None = None) -> Extraction | None:
    """The final answer ``text`` states and the rule that found it; None when it states none.

    ``like``: the expected answer, when known. An option letter or yes/no there makes the reply be
    read for that kind of answer (:mod:`~ptfactory.filters.verify.answer_kinds`); otherwise it
    changes nothing."""
    if not text or not text.strip():
        return None
    text = _PLAIN_ROOT.sub(_root, text.translate(_READ_AS))
    kind = kind_of(like)
    if kind is not None:
        return _of_kind(kind, text, fallback)
    size = _set_size(like)
    if size:
        return _of_set(size, text, fallback)
    hashed = _HASH.findall(text)
    if hashed and (answer := normalize_answer(hashed[-1])):
        return Extraction(answer, "hash")
    tagged = _TAG.findall(text)
    if tagged and (answer := normalize_answer(tagged[-1])):
        return Extraction(answer, "tag")
    boxed = _last_boxed(text)
    if boxed is not None and (answer := normalize_answer(boxed)):
        return Extraction(answer, "boxed")
    if stated := _stated(text):
        return Extraction(stated, "stated")
    if fallback:
        whole = text.strip()
        answer = normalize_answer(whole) if "\n" not in whole and len(whole.split()) <= _WHOLE_WORDS else None
        # a short text with a number is its answer only when it is that number ("20 days", not "It is 18")
        if answer and (_NUMBER.fullmatch(answer) or not re.search(r"\d", whole)):
            return Extraction(answer, "whole")
        math = _last_math(text)
        if math is not None and not _NUMBER.search(text[math[1] :]) and (answer := normalize_answer(math[0])):
            return Extraction(answer, "last_math")
        numbers = list(_NUMBER.finditer(text))
        # the last number, with a scale word after it ("2.5 thousand" is 2500, not 2.5)
        scale = _SCALE_AFTER.match(text, numbers[-1].end()) if numbers else None
        last = numbers[-1].group(0) + (scale.group(0) if scale else "") if numbers else ""
        if numbers and (answer := normalize_answer(last)):
            return Extraction(answer, "last_number")
        if not numbers and (answer := last_word_number(text)):  # no digits: "There are three cats."
            return Extraction(answer, "word_number")
    return None


def extract_answer(text: str | None, *, fallback: bool = True, like: str | None = None) -> str | None:
    """The final answer ``text`` states (normalised), or None: :func:`extract` without the rule."""
    found = extract(text, fallback=fallback, like=like)
    return found.answer if found else None
