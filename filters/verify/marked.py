"""The reply's marked answers (:mod:`~ptfactory.filters.verify.extract`'s rules ``hash``, ``tag``,
``boxed`` and ``stated``): where each is, and which one decides when several disagree."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeGuard

from ptfactory.filters.verify.markers import CORRECTION, concludes_otherwise, hash_answer, marked_otherwise
from ptfactory.filters.verify.spans import all_boxes, same_answer

__all__ = [
    "AMBIGUOUS",
    "END",
    "final_marked",
    "marker_start",
    "numeric",
    "stated_spans",
]

HASH = re.compile(r"####\s*([^\n]+)")
TAG = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.S)
# where a stated answer ends: a sentence's end, a clause ("which", "because", "but", "not", "i.e."),
# a remark in brackets ("39 points (since 33 + 6 = 39)"), "!"
END = (
    r"(?=\.\s|\.$|\n|;|,\s*(?:which|because|so|and|since|as|but|not|that)\b|\s+(?:but|not)\b"
    r"|,?\s*(?:i\.\s?e\.|e\.\s?g\.)|,\s*(?:each|every|per|at|with|leaving|making|giving|saving|a|an)\s|\s*\((?=\s*(?:since|because|as|from|via|using|that'?s|which|for)\b)"
    r"|!!|!(?=\s*$|\s+[A-Z\"'*]|\s*\n)|$)"
)
# "the answer is X", "Answer: X", "answer = X", "the correct option is C) 12"; "isn't" is no "is"
STATED = re.compile(
    r"(?<![\w-])(?:(?:(?:final|correct|right)\s+)?answer(?:\s+to\s+(?:this|the|our|your)\s+(?:question|problem"
    r"|exercise|puzzle))?|(?:correct|right|best|final)\s+(?:option|choice))"
    rf"\s*(?:is\b|was\b|would\s+be\b|will\s+be\b|:|=)\s*:?\s*(.+?){END}",
    re.I | re.S,
)
CONTRAST = re.compile(r"\s*,?\s*but\b", re.I)  # taken back: "You might think the answer is 18, but"
NEGATED = re.compile(r"(?:not|n't|never)\b", re.I)
_FENCED = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1", re.S | re.M)
_RESTATED = re.compile(r"^(?:the\s+)?(?:(?:final|correct|right)\s+)?answer\s+(?:is|was|:)\s*:?\s*", re.I)
# what an answer is worth, not what it is: "Each correct answer is worth 2.5 points."
_VALUED = re.compile(r"(?:worth|weighted|awarded|given|marked|scored|graded|counted)\b", re.I)
MAX_SPAN = 200  # a stated "answer" longer than this is prose, not an answer
AMBIGUOUS = "\x00"  # a marked answer that holds several candidates: no answer, never a guess


def numeric(answer: str | None) -> TypeGuard[str]:
    """A read answer that holds a number (prose, "straightforward", or a letter compares as none)."""
    return answer is not None and answer != AMBIGUOUS and bool(re.search(r"\d", answer))


def stated_spans(text: str) -> list[tuple[str, str, int, int]]:
    """Every "the answer is X" of ``text``: (X, the text after it, where the phrase starts, where X
    ends); an answer taken back ("..., but") or negated ("is not 18") is left out."""
    spans = []
    code = [m.span() for m in _FENCED.finditer(text)]
    for match in STATED.finditer(text):
        span, after = match.group(1).strip(), text[match.end(1) :]
        if (
            any(start <= match.start() < end for start, end in code)  # "answer = s2" in a program
            or not span
            or len(span) > MAX_SPAN
            or CONTRAST.match(after)
            or NEGATED.match(span)
            or _VALUED.match(span)
        ):
            continue
        # "Final Answer: The final answer is $\frac{3}{4}$": the inner phrase goes
        span = _RESTATED.sub("", span, count=1) or span
        spans.append((span, after, match.start(), match.end(1)))
    return spans


def final_marked(text: str, read: Callable[[str, str | None], str | None]) -> tuple[str, str] | None:
    """The reply's marked answer as ``read`` reads a span (a box's, a tag's or a ``####`` line's span
    comes with ``None``, a stated one with the text after it), and its rule: the last ``####`` line
    that is an answer, else the last ``<answer>`` block, else the last box, else the last stated
    answer. A stated answer after the deciding ``####`` / tag / box that differs from it wins after
    a correction ("\\boxed{18} ... Wait, I made a mistake ... the correct answer is 17"); without
    one the two disagree: ``(AMBIGUOUS, rule)``, as when the deciding answer holds several or an
    earlier marked answer names another number with no correction between."""
    stated = None
    spans = stated_spans(text)
    for k in range(len(spans) - 1, -1, -1):
        span, after, start, _ = spans[k]
        if (answer := read(span, after)) is not None:
            stated = (answer, start)
            earlier = [(said, e) for o, a, _, e in spans[:k] if numeric(said := read(o, a))]
            if numeric(answer) and (
                marked_otherwise(text, earlier, start, answer, read=read, ambiguous=AMBIGUOUS)
                or concludes_otherwise(after, answer)
            ):
                stated = (AMBIGUOUS, start)
            break
    hashed = [(m.group(1), m.end()) for m in HASH.finditer(text) if hash_answer(m.group(1))]
    tagged = [(m.group(1), m.end()) for m in TAG.finditer(text)]
    boxes = all_boxes(text)
    for rule, found in (("hash", hashed), ("tag", tagged), ("boxed", boxes)):
        if not found or not (answer := read(found[-1][0], None)):
            continue
        end = found[-1][1]
        if answer != AMBIGUOUS and concludes_otherwise(text[end:], answer):
            return AMBIGUOUS, rule
        if answer != AMBIGUOUS and marked_otherwise(
            text, hashed + tagged + boxes, end, answer, read=read, ambiguous=AMBIGUOUS
        ):
            return AMBIGUOUS, rule
        earlier = [(said, e) for o, a, _, e in spans if e < end and numeric(said := read(o, a))]
        if answer != AMBIGUOUS and marked_otherwise(
            text, earlier, end, answer, read=read, ambiguous=AMBIGUOUS
        ):
            return AMBIGUOUS, rule  # "The answer is 56." then a note's <answer>63</answer>
        if (
            stated is not None
            and stated[1] >= end
            and answer != AMBIGUOUS
            and not same_answer(stated[0], answer)
        ):
            corrected = CORRECTION.search(text[end : stated[1] + 20])
            return (stated[0] if corrected else AMBIGUOUS), "stated"
        return answer, rule
    return (stated[0], "stated") if stated is not None else None


def marker_start(text: str, rule: str) -> int:
    """Where the reply's deciding marked answer (of ``rule``) starts: its "####", tag, box or
    "the answer is"."""
    if rule == "hash":
        return [m for m in HASH.finditer(text) if hash_answer(m.group(1))][-1].start()
    if rule == "tag":
        return list(TAG.finditer(text))[-1].start()
    if rule == "boxed":
        box = text.rfind("box", 0, all_boxes(text)[-1][1])
        return text.rfind("\\", 0, box) if box > 0 else 0
    spans = stated_spans(text)
    return spans[-1][2] if spans else 0
