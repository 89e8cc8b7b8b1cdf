"""Instruction-Following Difficulty (Li et al., 2024, "From Quantity to Quality", arXiv:2308.12032).

IFD = PPL(response | instruction) / PPL(response): how much the instruction helps the student
predict the response. Both perplexities come from ``Engine.score`` with the response as the
assistant turn after the *same* chat frame: the instruction as the user turn, or an empty user
turn. Scoring the unconditioned pass after a bare BOS instead (as the paper's code does for base
models) measured mostly the frame: a chat model finds any answer likelier inside its chat template,
so IFD sat far below 1 for every row, right or wrong, and ``ifd_max`` never fired. In one frame,
IFD >= 1 means the instruction does not help (an answer to another question); a small IFD means
the instruction all but spells the response out.

The band is absolute (``DifficultyConfig.ifd_min`` / ``ifd_max``, measured: docs/difficulty.md),
the same for every batch: a batch of good rows loses none of them to a quota.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ptfactory.engines.base import Conversation, Engine
from ptfactory.filters.difficulty.config import DifficultyConfig
from ptfactory.filters.difficulty.rows import Outcome, answer, prompt

__all__ = ["NEUTRAL_TURN", "IFDScore", "conditioned", "ifd_outcomes", "ifd_scores", "unconditioned"]

# the user turn of the unconditioned pass: the chat frame without an instruction
NEUTRAL_TURN = ""


@dataclass(frozen=True)
class IFDScore:
    value: float  # PPL(r | i) / PPL(r)
    conditioned_ppl: float
    free_ppl: float

    def describe(self) -> str:
        return f"IFD {self.value:.3f}: PPL(r|i)={self.conditioned_ppl:.2f} PPL(r)={self.free_ppl:.2f}"


def conditioned(instruction: str) -> Conversation:
    return [{"role": "user", "content": instruction}]


def unconditioned() -> Conversation:
    return [{"role": "user", "content": NEUTRAL_TURN}]


def ifd_scores(student: Engine, prompts: Sequence[str], responses: Sequence[str]) -> list[IFDScore | None]:
    """One :class:`IFDScore` per (prompt, response); None where the response has no tokens."""
    with_instruction = student.score([conditioned(p) for p in prompts], list(responses))
    alone = student.score([unconditioned() for _ in prompts], list(responses))
    out: list[IFDScore | None] = []
    for cond, free in zip(with_instruction, alone, strict=True):
        if not cond.logprobs or not free.logprobs:
            out.append(None)
            continue
        out.append(
            IFDScore(
                value=math.exp(cond.mean_nll - free.mean_nll),
                conditioned_ppl=math.exp(cond.mean_nll),
                free_ppl=math.exp(free.mean_nll),
            )
        )
    return out


def ifd_outcomes(
    rows: list[dict[str, Any]], indices: list[int], student: Engine, config: DifficultyConfig
) -> dict[int, Outcome]:
    """IFD of each row of ``indices`` against the band [``ifd_min``, ``ifd_max``)."""
    scores = ifd_scores(student, [prompt(rows[i]) for i in indices], [answer(rows[i]) for i in indices])
    band = f"band [{config.ifd_min:g}, {config.ifd_max:g})"
    out: dict[int, Outcome] = {}
    for index, score in zip(indices, scores, strict=True):
        if score is None:
            out[index] = Outcome("ifd", None, "keep", "not_scored", "empty response")
            continue
        detail = f"{score.describe()}; {band}"
        if score.value >= config.ifd_max:
            out[index] = Outcome("ifd", score.value, "drop", "instruction_unhelpful", detail)
        elif score.value < config.ifd_min:
            out[index] = Outcome("ifd", score.value, "drop", "too_easy", detail)
        else:
            out[index] = Outcome("ifd", score.value, "keep", "in_band", detail)
    return out
