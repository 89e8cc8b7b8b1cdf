"""Pairwise judging with position swap: which of two responses to one prompt is better.

LLM judges prefer whichever answer they read first (or second) more often than the answers
deserve (position bias: Zheng et al., 2023, "Judging LLM-as-a-Judge"; Wang et al., 2023, "Large
Language Models are not Fair Evaluators"). So each judge sees both orders, A/B and B/A, and is
read from its probabilities over the letters. A verdict that flips with the order abstains for
that pair; the share of pairs whose verdict survives the swap is the judge's swap consistency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptfactory.annotators.judges.llm import LLMJudge
from ptfactory.engines.base import Prompt
from ptfactory.generators.prompts import Template
from ptfactory.generators.prompts import template as load_template

__all__ = ["PairVote", "PairwiseJudge", "swap_consistency"]

TEMPLATES = Path(__file__).parent / "templates"
_MAX_CHARS = 3000  # each response; two share the judge's context


@dataclass(frozen=True)
class PairVote:
    judge: str
    preferred: str | None  # "first" | "second" (of the pair as given), None: abstains
    p_first: float  # P(first is better), averaged over the two orders
    consistent: bool  # the same answer in both orders
    detail: str = ""


@dataclass
class PairwiseJudge:
    """An LLM judge's engine and prompt style, asked to compare instead of score."""

    judge: LLMJudge
    _templates: dict[str, Template] = field(default_factory=dict, init=False, repr=False)

    @property
    def name(self) -> str:
        return self.judge.name

    def _prompt(self, instruction: str, first: str, second: str) -> Prompt:
        completion = self.judge.prompt_style == "completion"
        name = "pairwise_fewshot" if completion else "pairwise_score"
        if name not in self._templates:
            self._templates[name] = load_template(name, TEMPLATES)
        text = self._templates[name].render(
            instruction=instruction, first=first[:_MAX_CHARS], second=second[:_MAX_CHARS]
        )
        return text if completion else [{"role": "user", "content": text}]

    def _letters(self) -> tuple[str, str]:
        # A base model continues "Better:" with " A" (one token with its space); a chat reply
        # starts with the bare letter.
        return (" A", " B") if self.judge.prompt_style == "completion" else ("A", "B")

    def compare(
        self, instructions: Sequence[str], firsts: Sequence[str], seconds: Sequence[str]
    ) -> list[PairVote]:
        engine = self.judge.engine
        assert engine is not None
        n = len(instructions)
        prompts = [self._prompt(i, a, b) for i, a, b in zip(instructions, firsts, seconds, strict=True)]
        prompts += [self._prompt(i, b, a) for i, a, b in zip(instructions, firsts, seconds, strict=True)]
        table = engine.choice_logprobs(prompts, self._letters())
        votes = []
        for k in range(n):
            forward = _p_first_letter(table[k])  # P(A) with the pair as given: first is better
            swapped = 1.0 - _p_first_letter(table[n + k])  # P(B) when swapped: first is better
            says_first = (forward > 0.5, swapped > 0.5)
            consistent = says_first[0] == says_first[1]
            preferred = ("first" if says_first[0] else "second") if consistent else None
            detail = f"P(first better): {forward:.2f} as given, {swapped:.2f} swapped"
            votes.append(
                PairVote(self.name, preferred, round((forward + swapped) / 2, 4), consistent, detail)
            )
        return votes


def _p_first_letter(logprobs: list[float]) -> float:
    """P(A) renormalised over {A, B}."""
    a, b = (math.exp(lp) if math.isfinite(lp) else 0.0 for lp in logprobs)
    return a / (a + b) if a + b > 0 else 0.5


def swap_consistency(votes: Sequence[PairVote]) -> float | None:
    return sum(v.consistent for v in votes) / len(votes) if votes else None


def candidate_pairs(rows: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """(best, worst) row indices by judge mean, per instruction with two or more scored answers
    (answers to one instruction share its id as ``provenance.parent_id``)."""
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        parent = (row.get("provenance") or {}).get("parent_id")
        mean = (row.get("scores") or {}).get("judge_mean")
        if parent and mean is not None and row.get("kind") == "sft":
            groups.setdefault(parent, []).append(i)
    pairs = []
    for members in groups.values():
        if len(members) >= 2:
            ranked = sorted(members, key=lambda i: rows[i]["scores"]["judge_mean"])
            pairs.append((ranked[-1], ranked[0]))
    return pairs
