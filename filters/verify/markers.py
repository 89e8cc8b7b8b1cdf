"""What marks a reply's final answer as one, or takes it back (the extractor's rules:
:mod:`~ptfactory.filters.verify.extract`): a ``####`` line that is a markdown heading, a check
after the answer, a ``<think>`` block, a self-correction, a conclusion that contradicts a boxed
answer."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from ptfactory.filters.verify.spans import (
    NUM,
    NUMBER,
    normalize_answer,
    number_value,
    same_answer,
    strip_wrappers,
)

__all__ = [
    "CHECK_LINE",
    "CORRECTION",
    "RESULT",
    "SENTENCE_END",
    "after_thinking",
    "concludes_otherwise",
    "corrections",
    "hash_answer",
    "marked_otherwise",
    "without_closing",
    "without_footnotes",
]

# a correction after an answer: "The answer is B, no wait, it's C", "Wait, I made a mistake: ..."
# (not a warning about one: "the common mistake of doing 8 / 40")
CORRECTION = re.compile(
    r"\b(?:wait|actually|(?<!common )(?<!typical )(?<!classic )(?<!frequent )(?<!usual )(?<!avoid the )"
    r"(?<!easy )(?:mistake|error)|wrong|incorrect|oops|sorry|correct(?:ion|ed)|recalculat\w*|re-?check\w*"
    r"|instead|misread|misunderstood|on\s+second\s+thought|hmm,?\s+no)\b",
    re.I,
)
# a correction only supposed: "(if I misread something, then 12)", "in case I am wrong"
_IF = re.compile(r"\b(?:if|in\s+case|unless|should)\s+(?:i|we)\b[^.!?\n]*$", re.I)
# a markdown heading written with GSM8K's marker is no answer: "#### Step 1: Eggs", "#### Final Answer"
_HEADINGS = frozenset(
    {"step", "final", "answer", "solution", "conclusion", "summary", "explanation", "calculation", "result"}
)
# a check after the answer: its numbers are not the answer ("Check: 18 + 2 = 20.")
CHECK_LINE = re.compile(r"^\W*(?:check|checking|verify|verification|double[- ]check)\b", re.I)
# a concluding sentence after a boxed answer: "\boxed{60} So she reads 45 pages in total."
_CONCLUSION = re.compile(
    r"(?:^|[.!?\n]\s*)(?:so|therefore|thus|hence|in total|overall|in conclusion)\b([^.!?\n]*)", re.I
)

# a pleasantry that ends a reply: "Hope this helps!", "Let me know if you have questions (1-2
# follow-ups welcome).", "So that's it - happy to go over the 2 steps again!": its numbers are no answer
_CLOSER = re.compile(
    r"^[\W_]*(?:(?:so|well|and|ok(?:ay)?)[\s,]+)?(?:(?:i'?m|i\s+am|we'?re|we\s+are|always)\s+)?(?:let\s+me\s+know|(?:i\s+)?hope\s+(?:this|that|it|you)|thanks|thank\s+you"
    r"|happy\s+to|glad\s+to|feel\s+free|good\s+luck|best\s+of\s+luck|have\s+a\s+(?:great|nice|good)|if\s+you\s+"
    r"(?:have|need|want)|any\s+(?:other\s+|more\s+|further\s+)?questions|cheers|enjoy|that'?s\s+(?:it|all)"
    r"|try\s+the\b|(?:a\s+)?(?:nice|fun|good|great)\s+(?:warm-?up|exercise|problem|one))"
    r"|\bfollow-?ups?\b[^.!?\n]*\bwelcome\b",
    re.I,
)
# a closing check or recap: "As a quick sense check, 3 h = 180 min.", "To summarize the problem: we
# were given $2,400, 5% ..." (not one that concludes: "Checking: 5 + 13 = 18, so the answer is 18.")
_CHECK = re.compile(
    r"^[\W_]*(?:as\s+a\s+)?(?:quick\s+)?(?:sense[- ]|sanity[- ]|double[- ])?check(?:ing)?\b"
    r"|^[\W_]*to\s+(?:check|verify|double-check)\b"
    r"|^[\W_]*(?:to\s+(?:summari[sz]e|recap)\s+(?:the\s+)?(?:problem|question)|we\s+were\s+given\b)",
    re.I,
)
_CONCLUDING = re.compile(r"\b(?:so|therefore|thus|hence|answer)\b", re.I)
# an equation's result: "= 18", "= $1,200"
RESULT = re.compile(rf"=\s*(?:\\?\$|€|£|¥)?\s*({NUM})(?![\d.]\d)")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def without_closing(text: str) -> str:
    """``text`` without the pleasantries that end it (:data:`_CLOSER`, sentence by sentence from the
    end), so a number in "Good luck on test 3!" is not read as the answer."""
    cuts = [0] + [m.end() for m in SENTENCE_END.finditer(text)]
    end = len(text)
    for start in reversed(cuts):
        sentence = text[start:end].strip()
        if not re.search(r"[^\W_`~]", sentence) and not re.search(r"`|~", sentence):  # an emoji: "😊"
            end = start
            continue
        # "Overall, a nice warm-up; try ...": a closer may open after a comma or a dash
        check = _CHECK.search(sentence) and not _CONCLUDING.search(sentence)
        if not check and not any(
            _CLOSER.search(part) for part in re.split(r"[,;:\u2014\u2013-]\s+", sentence)[:2]
        ):
            break
        end = start
    return text[:end] if text[:end].strip() else text


def hash_answer(span: str) -> bool:
    """Is a ``####`` line an answer ("#### 18", "#### B", "#### 18 or 20": one to read) and not a
    markdown heading ("#### Step 1: Eggs", "#### 2. Money", "#### Final Answer", "#### Solution:")?"""
    text = strip_wrappers(span)
    first = re.match(r"[A-Za-z]+", text)
    if not text or text.endswith(":") or re.match(r"\d+[.)]\s+[A-Za-z]", text):
        return False
    if first is not None and first.group(0).lower() in _HEADINGS:
        return False
    return bool(re.search(r"\d", text)) or len(text.split()) == 1


def after_thinking(text: str) -> str:
    """The reply after its last ``</think>`` (the answer follows the reasoning); empty when its
    thinking never closed (it gave no answer)."""
    if "<think>" not in text and "</think>" not in text:
        return text
    closed = text.rfind("</think>")
    return text[closed + len("</think>") :] if closed >= 0 else ""


def corrections(text: str) -> Iterator[str]:
    """The text after each correction word, the last first (the extractor takes the first of these
    that states an answer)."""
    for marker in reversed(list(CORRECTION.finditer(text))):
        if not _IF.search(text[max(0, marker.start() - 24) : marker.start()]):
            yield text[marker.end() :]


def concludes_otherwise(after: str, answer: str) -> bool:
    """Does the text after a marked numeric answer conclude with another number (the reply
    contradicts itself: no answer)?"""
    if number_value(answer) is None:
        return False
    for match in _CONCLUSION.finditer(after):
        numbers = NUMBER.findall(match.group(1))
        if numbers and not any(same_answer(normalize_answer(n) or n, answer) for n in numbers):
            return True
    # working after the answer that ends on its own result: "Correct answer: 7 ... Work: 84 / 12 = 6.
    # Each child gets 6 cookies." (a correction between is the corrections' business)
    after = "\n".join(
        line for line in after.splitlines() if not CHECK_LINE.match(line)
    )  # "Check: 18 + 12 = 30"
    results = list(RESULT.finditer(after))
    if not results or CORRECTION.search(after):
        return False
    result = normalize_answer(results[-1].group(1))
    later = NUMBER.findall(after[results[-1].end() :])
    final = normalize_answer(later[-1]) if later else result
    return bool(result and final and same_answer(final, result) and not same_answer(result, answer))


def marked_otherwise(
    text: str,
    marks: list[tuple[str, int]],
    end: int,
    answer: str,
    *,
    read: Callable[[str, str | None], str | None],
    ambiguous: str,
) -> bool:
    """Does another marked answer (``marks``: a span and where it ends: a ``####`` line, a tag, a
    box, an earlier "the answer is") say something other than ``answer`` (its mark ends at ``end``)
    with no correction between the two? "The answer is 56." then a note's ``<answer>63</answer>``,
    "\\boxed{56}" then "#### 63": the reply states two answers (``read``: how a span is read;
    ``ambiguous``: what it gives for several candidates)."""
    for span, at in marks:
        if at == end or not (other := read(span, None)) or other == ambiguous or same_answer(other, answer):
            continue
        if not CORRECTION.search(text[min(at, end) : max(at, end)]):
            return True
    return False


# a footnote's text: "[^1]: Some sources list 7/8." is a remark beside the reply, never its answer
_FOOTNOTE = re.compile(r"^[ \t]*\[\^[\w-]+\]:[^\n]*(?:\n|$)", re.M)


def without_footnotes(text: str) -> str:
    return _FOOTNOTE.sub("", text)
