"""Is a close pair of instructions one task? The check semantic dedup runs on each embedding neighbour.

Sentence embeddings place two tasks worded on one template side by side (all-MiniLM-L6-v2 cosine: "converts
Celsius to Fahrenheit" / "Fahrenheit to Celsius" 1.00, "earning more than $50,000" / "less than" 0.98, "sum of a
list" / "product of a list" 0.74, above many true paraphrases): the shared template outweighs the word that
changes the task. So a neighbour is merged only when
the words on which the two instructions differ are themselves a paraphrase:

- **numbers** (digits and number words: "twelve dollars" is "$12"): two instructions that both hold numbers
  but not the same ones, as often each, are two problems ("240 km in 3 hours" / "300 km in 3 hours", and
  GSM8K's questions, which share their few small numbers by chance); one side adding a value ("five tips")
  is not.
- **functions**: each naming a function the other does not (``def add(``, ``is_prime(n)``): the tests of a
  code task call its entry point, so another entry point is another task.
- **names** (capitalised words inside a sentence, acronyms: Ann, Hamlet, French, SQL): each side naming
  someone or something the other does not is another task ("How old is Ann" / "How old is Tom").
- **identifiers** (file names such as ``calc.py`` or ``README.md``, and code in backticks): each side naming a
  file or an identifier the other does not is another task ("Some tests in test_calc.py fail" / "Rename
  `slugify_text` to `slugify`": agent tasks worded alike, cosine 0.59, merged before).
- **aligned wording**: when the two instructions are one template (their word sequences match at
  ``min_alignment`` or more), each span one replaces with another, and the words only one side holds, are
  embedded on their own and must reach ``min_substitution`` ("largest" / "biggest" 0.94; "ascending" /
  "descending" 0.81, "sum" / "product" 0.37); a content word swapped with its neighbour ("Celsius to
  Fahrenheit" / "Fahrenheit to Celsius") is a change of direction. Below ``min_alignment`` the instructions
  are reworded throughout, spans cannot be paired, and the embedding's cosine decides alone.

Words that only carry the instruction's form (articles, auxiliaries, "write", "implement", "function") are
left out of the spans. Every verdict names its reason, so a pair kept apart can be explained.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PairVerdict", "check_pairs", "tokens"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Form words: dropping them changes how a request is put, not what it asks for.
STOP = _words(
    """a an the of to in on at for by with from into as and or nor but if that which who whom whose this these
    those it its is are was were be been being am do does did have has had having can could would should will
    shall may might must i me my we us our you your he him his she her they them their there here what how
    please just also then than so such"""
)
BOILERPLATE = _words(
    """write writes create implement compose draft give make develop build produce generate provide help need
    want code function program script method routine return returns returning given find compute calculate
    determine get"""
)
# "one" is left out: "the largest one", "the odd ones" are pronouns far more often than the number
_UNITS = "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen"
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety"
_NUMBER_WORDS = {w: i for i, w in enumerate(_UNITS.split()) if w != "_"}
_NUMBER_WORDS.update({w: 10 * (i + 2) for i, w in enumerate(_TENS.split())})
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_TOKEN = re.compile(r"\d+(?:[.,:/]\d+)*|[A-Za-z]+|[+\-*/=<>^%]")
_NAME = re.compile(r"\b[A-Z][A-Za-z]*")
# a function an instruction names: `def name(`, `function name(`, or a call-like snake_case / camelCase name
_ENTRY = re.compile(r"\b(?:(?:def|function)\s+([A-Za-z_]\w*)|([a-z]\w*_\w*|[a-z]+[A-Z]\w*))\s*\(")
# a file an instruction names ("calc.py", "config/app.yaml") or code it quotes in backticks
_IDENT = re.compile(r"`([^`\n]+)`|(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.[a-z][a-z0-9]{0,4})\b(?![\w(])")


@dataclass(frozen=True)
class Token:
    text: str  # lower-cased word, normalised number or symbol
    number: bool


def _number(text: str) -> str:
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 50,000 -> 50000
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        value = float(text)
        return str(int(value)) if value.is_integer() else str(value)
    return text  # 7:45, 22/7


def tokens(text: str) -> list[Token]:
    """Words (camelCase and snake_case split), numbers (words read as numbers) and arithmetic symbols."""
    text = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text)
    out: list[Token] = []
    for match in _TOKEN.finditer(text):
        word = match.group()
        low = word.lower()
        if word[0].isdigit():
            out.append(Token(_number(word), True))
        elif low in _NUMBER_WORDS:
            value = _NUMBER_WORDS[low]
            last = out[-1] if out else None
            if last and last.number and last.text.isdigit() and int(last.text) % 10 == 0 and value < 10:
                out[-1] = Token(str(int(last.text) + value), True)  # twenty-eight
            else:
                out.append(Token(str(value), True))
        elif low == "percent":
            out.append(Token("%", False))
        elif low in _SCALES and out and out[-1].number and out[-1].text.isdigit():
            out[-1] = Token(str(int(out[-1].text) * _SCALES[low]), True)  # five hundred
        else:
            out.append(Token(low, False))
    return out


def _names(text: str) -> set[str]:
    """Capitalised words that do not open a sentence, and acronyms (SQL, GCD) wherever they stand."""
    found = set()
    for match in _NAME.finditer(text):
        word = match.group()
        before = text[: match.start()].rstrip()
        opens = not before or before[-1] in ".!?:;\"'(`-"
        possessive = text[match.end() : match.end() + 2] in ("'s", "’s")
        if len(word) > 1 and (not opens or word.isupper() or possessive):
            found.add(word.lower())
    return found


def _identifiers(text: str) -> set[str]:
    """The files ``text`` names and the code it quotes in backticks (a sentence's "e.g." or "3.5" is
    neither: a file's extension starts with a letter and the name holds one)."""
    found = set()
    for match in _IDENT.finditer(text):
        quoted, path = match.groups()
        name = (quoted or path).strip()
        if quoted or (re.search(r"[A-Za-z_]", path.rsplit(".", 1)[0]) and len(path.rsplit(".", 1)[0]) > 1):
            found.add(name.lower())
    return found


def _content(words: Sequence[str]) -> list[str]:
    return [w for w in words if w not in STOP and w not in BOILERPLATE]


def _swapped(a: list[str], b: list[str]) -> bool:
    """Two words joined by the same form words in both, in opposite orders: "Celsius to Fahrenheit" /
    "Fahrenheit to Celsius", "smallest to largest" / "largest to smallest"."""

    def links(words: list[str]) -> set[tuple[str, tuple[str, ...], str]]:
        found = set()
        for i, x in enumerate(words):
            if x in STOP or x in BOILERPLATE or not x.isalpha():
                continue
            j = i + 1
            while j < len(words) and words[j] in STOP:
                j += 1
            if i + 1 < j < len(words) and words[j].isalpha() and words[j] not in BOILERPLATE:
                found.add((x, tuple(words[i + 1 : j]), words[j]))
        return found

    la, lb = links(a), links(b)
    return any((y, link, x) in lb and (x, link, y) not in lb for x, link, y in la if x != y)


@dataclass(frozen=True)
class PairVerdict:
    same: bool
    reason: str  # "paraphrase", "numbers", "functions", "identifiers", "names", "swapped", "substitution"
    detail: str = ""  # the differing values, names or spans


def check_pairs(
    pairs: Sequence[tuple[str, str]],
    encode: Callable[[list[str]], np.ndarray],
    min_alignment: float,
    min_substitution: float,
) -> list[PairVerdict]:
    """A verdict per pair of instructions already close by embedding (see the module docstring); ``encode``
    embeds the differing spans, all pairs' spans in one call."""
    pending: list[tuple[int, list[tuple[str, str]]]] = []
    verdicts: list[PairVerdict | None] = []
    for a, b in pairs:
        ta, tb = tokens(a), tokens(b)
        na = Counter(t.text for t in ta if t.number)
        nb = Counter(t.text for t in tb if t.number)
        if na and nb and na != nb:
            verdicts.append(
                PairVerdict(
                    False, "numbers", f"{sorted((na - nb).elements())} / {sorted((nb - na).elements())}"
                )
            )
            continue
        fa = {m.group(1) or m.group(2) for m in _ENTRY.finditer(a)}
        fb = {m.group(1) or m.group(2) for m in _ENTRY.finditer(b)}
        if fa - fb and fb - fa:  # another entry point: the tests call another function
            verdicts.append(PairVerdict(False, "functions", f"{sorted(fa - fb)} / {sorted(fb - fa)}"))
            continue
        ia, ib = _identifiers(a), _identifiers(b)
        if ia - ib and ib - ia:  # another file or identifier: another task
            verdicts.append(PairVerdict(False, "identifiers", f"{sorted(ia - ib)} / {sorted(ib - ia)}"))
            continue
        names = _names(a) | _names(b)
        wa, wb = [t.text for t in ta], [t.text for t in tb]
        ma, mb = names & set(wa), names & set(wb)
        if ma - mb and mb - ma:
            verdicts.append(PairVerdict(False, "names", f"{sorted(ma - mb)} / {sorted(mb - ma)}"))
            continue
        if _swapped(wa, wb):
            verdicts.append(PairVerdict(False, "swapped"))
            continue
        if difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).ratio() < min_alignment:
            verdicts.append(PairVerdict(True, "paraphrase"))
            continue
        ca, cb = _content(wa), _content(wb)
        matcher = difflib.SequenceMatcher(a=ca, b=cb, autojunk=False)
        spans: list[tuple[str, str]] = []
        only_a: list[str] = []
        only_b: list[str] = []
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            xa, xb = ca[i1:i2], cb[j1:j2]
            if op == "replace":
                spans.append((" ".join(xa), " ".join(xb)))
            elif op != "equal":
                only_a += xa
                only_b += xb
        if only_a and only_b:
            spans.append((" ".join(only_a), " ".join(only_b)))
        spans = [(x, y) for x, y in spans if x != y]
        if not spans:
            verdicts.append(PairVerdict(True, "paraphrase"))
            continue
        verdicts.append(None)
        pending.append((len(verdicts) - 1, spans))
    if pending:
        texts = [s for _, spans in pending for pair in spans for s in pair]
        vectors = np.asarray(encode(texts), dtype=np.float32)
        at = 0
        for where, spans in pending:
            n = len(spans)
            left, right = vectors[at : at + 2 * n : 2], vectors[at + 1 : at + 2 * n : 2]
            at += 2 * n
            sims = np.sum(left * right, axis=1)
            worst = int(np.argmin(sims))
            if sims[worst] < min_substitution:
                x, y = spans[worst]
                verdicts[where] = PairVerdict(False, "substitution", f"{x!r} / {y!r} {sims[worst]:.2f}")
            else:
                verdicts[where] = PairVerdict(True, "paraphrase")
    return [v for v in verdicts if v is not None]
