"""ROUGE-L novelty filter (Self-Instruct, Wang et al. 2023: keep an instruction only if its
ROUGE-L with every earlier one is below 0.7)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["NoveltyFilter", "rouge_l"]

_WORD = re.compile(r"\w+")


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _lcs(a: list[str], b: list[str]) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l(a: str, b: str) -> float:
    """ROUGE-L F1 between two texts over lower-cased word tokens."""
    ta, tb = _tokens(a), _tokens(b)
    if not ta or not tb:
        return 0.0
    lcs = _lcs(ta, tb)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(ta), lcs / len(tb)
    return 2 * precision * recall / (precision + recall)


@dataclass
class NoveltyFilter:
    threshold: float = 0.7
    seen: list[str] = field(default_factory=list)

    def check(self, text: str) -> tuple[bool, float, str | None]:
        """(novel?, highest ROUGE-L, the most similar earlier text)."""
        best, closest = 0.0, None
        for other in self.seen:
            score = rouge_l(text, other)
            if score > best:
                best, closest = score, other
        return best < self.threshold, best, closest

    def add(self, text: str) -> None:
        self.seen.append(text)
