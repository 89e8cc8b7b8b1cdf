"""Pairwise judging with position swap: which of two responses to one prompt is better.

LLM judges prefer whichever answer they read first (or second) more often than the answers
deserve (position bias: Zheng et al., 2023, "Judging LLM-as-a-Judge"; Wang et al., 2023, "Large
Language Models are not Fair Evaluators"). So each judge sees both orders, A/B and B/A, and is
read from its probabilities over the letters. A verdict that flips with the order abstains for
that pair; the share of pairs whose verdict survives the swap is the judge's swap consistency.

**Preference candidates.** Where an instruction has two or more scored answers whose judge means
differ by at least ``margin``, the best and the worst become a preference row (chosen: the higher
mean; A in the expert's A/B task). Each LLM judge votes on it by comparing the two in both orders:
score ``1 + 9 × P(chosen better)``, verdict ``A`` / ``B``, confidence ``|2P − 1|``, or ``abstain``
when its verdict flips with the order. Routing then accepts the pair when the comparisons confirm
the scores, and sends it to the expert A/B queue otherwise, the judges' verdicts pre-filled. The
candidates are built in Arrow (annotators/judges/pair_table.py): one implementation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ptfactory.annotators.judges.base import Vote
from ptfactory.annotators.judges.llm import LLMJudge
from ptfactory.engines.base import Prompt
from ptfactory.generators.prompts import Template
from ptfactory.generators.prompts import template as load_template

__all__ = [
    "PairVote",
    "PairwiseJudge",
    "PairwiseReport",
    "candidate_pairs",
    "pair_vote",
    "preference_candidates",
    "swap_consistency",
]

TEMPLATES = Path(__file__).parent / "templates"
_MAX_CHARS = 3000  # each response; two share the judge's context
_CHUNK = 2048  # pairs whose prompts are made and sent at once


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

    def probabilities(
        self, instructions: Sequence[str], firsts: Sequence[str], seconds: Sequence[str]
    ) -> tuple[list[float], list[float]]:
        """P(first is better) per pair: read with the pair as given (P(A)), and swapped (P(B)).
        Asked ``_CHUNK`` pairs at a time: a large batch's prompts (two responses each) are not all
        held at once."""
        engine = self.judge.engine
        assert engine is not None
        forward: list[float] = []
        swapped: list[float] = []
        for start in range(0, len(instructions), _CHUNK):
            chunk = slice(start, start + _CHUNK)
            triples = list(zip(instructions[chunk], firsts[chunk], seconds[chunk], strict=True))
            prompts = [self._prompt(i, a, b) for i, a, b in triples]
            prompts += [self._prompt(i, b, a) for i, a, b in triples]
            letters = [_p_first_letter(row) for row in engine.choice_logprobs(prompts, self._letters())]
            forward += letters[: len(triples)]
            swapped += [1.0 - p for p in letters[len(triples) :]]
        return forward, swapped

    def compare(
        self, instructions: Sequence[str], firsts: Sequence[str], seconds: Sequence[str]
    ) -> list[PairVote]:
        votes = []
        for forward, swapped in zip(*self.probabilities(instructions, firsts, seconds), strict=True):
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
    first, second = logprobs  # (no generator: this runs four times a pair)
    a = math.exp(first) if math.isfinite(first) else 0.0
    b = math.exp(second) if math.isfinite(second) else 0.0
    return a / (a + b) if a + b > 0 else 0.5


def swap_consistency(votes: Sequence[PairVote]) -> float | None:
    return sum(v.consistent for v in votes) / len(votes) if votes else None


def candidate_pairs(rows: Sequence[dict[str, Any]], margin: float = 0.0) -> list[tuple[int, int]]:
    """(chosen, rejected) row indices of :func:`~ptfactory.annotators.judges.batch.pair_candidates`
    over sample records (the same rule: best by judge mean over worst, per instruction)."""
    from ptfactory.annotators.judges.batch import pair_candidate_indices
    from ptfactory.storage.schema import from_records

    return pair_candidate_indices(from_records([_record(r) for r in rows]), margin) if rows else []


def _record(row: dict[str, Any]) -> dict[str, Any]:
    """A row as a sample record (fields it lacks null; ``batch`` and ``decisions`` set)."""
    return {"batch": "", "decisions": [], **row}


@dataclass
class PairwiseReport:
    """The preference candidates of a batch and what each LLM judge did with them."""

    rows: list[dict[str, Any]] = field(default_factory=list)  # preference rows, votes in scores.judges
    consistency: dict[str, float | None] = field(default_factory=dict)  # per judge: swap consistency
    agreement: dict[str, tuple[float | None, int]] = field(default_factory=dict)  # with the score gap
    table: pa.Table | None = None  # the rows as a table, where they were built as one (pair_table.py)

    @property
    def count(self) -> int:
        """How many preference rows."""
        return self.table.num_rows if self.table is not None else len(self.rows)


def pair_vote(judge: LLMJudge, vote: PairVote) -> Vote:
    if vote.preferred is None:
        why = f"abstains: the verdict flipped with the order ({vote.detail})"
        return Vote(judge.name, judge.model, None, "abstain", why, method="pairwise")
    return Vote(
        judge.name,
        judge.model,
        round(1 + 9 * vote.p_first, 4),
        "A" if vote.preferred == "first" else "B",
        vote.detail,
        method="pairwise",
        confidence=round(abs(2 * vote.p_first - 1), 4),
    )


def preference_candidates(
    rows: Sequence[dict[str, Any]],
    judges: Sequence[LLMJudge],
    margin: float,
    weights: Mapping[str, float] | None = None,
    leave_out: frozenset[str] = frozenset(),
) -> PairwiseReport:
    """:func:`~ptfactory.annotators.judges.pair_table.preference_candidate_table` over sample
    records (a notebook's rows): the preference rows as dicts in ``report.rows``."""
    from ptfactory.annotators.judges.pair_table import preference_candidate_table
    from ptfactory.storage.schema import from_records

    if not rows:
        return PairwiseReport()
    report = preference_candidate_table(
        from_records([_record(r) for r in rows]), judges, margin, weights, leave_out
    )
    report.rows = report.table.to_pylist() if report.table is not None else []
    return report
