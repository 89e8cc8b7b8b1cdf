"""Pairwise judging: a judge that only follows the position abstains; one that reads the content is
consistent across the swap; candidate pairs are best vs worst per instruction."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ptfactory.annotators.judges import LLMJudge
from ptfactory.annotators.judges.pairwise import PairwiseJudge, candidate_pairs, swap_consistency
from ptfactory.engines.base import Completion, Conversation, Engine, Prompt, SamplingParams


@dataclass
class Letters(Engine):
    """Prefers the letter in front of the word GOOD, or always A (pure position bias)."""

    biased: bool = False

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        raise NotImplementedError

    def _choice_logprobs(self, prompts: Sequence[Prompt], choices: Sequence[str]) -> list[list[float]]:
        out = []
        for prompt in prompts:
            text = prompt if isinstance(prompt, str) else prompt[0]["content"]
            a_good = text.index("Response A") < text.index("GOOD") < text.index("Response B")
            first = 0.9 if (self.biased or a_good) else 0.1
            out.append([math.log(first), math.log(1 - first)])
        return out


def test_position_bias_abstains_and_content_is_consistent() -> None:
    prompts, firsts, seconds = ["Say hi."] * 3, ["GOOD hi", "bad", "GOOD hello"], ["bad", "GOOD hey", "bad"]
    fair = PairwiseJudge(LLMJudge("fair", engine=Letters(model_id="f")))
    votes = fair.compare(prompts, firsts, seconds)
    assert [v.preferred for v in votes] == ["first", "second", "first"]
    assert swap_consistency(votes) == 1.0
    biased = PairwiseJudge(LLMJudge("biased", engine=Letters(model_id="b", biased=True)))
    votes = biased.compare(prompts, firsts, seconds)
    assert [v.preferred for v in votes] == [None, None, None]  # flips with the order: abstains
    assert swap_consistency(votes) == 0.0


def test_completion_style_uses_spaced_letters() -> None:
    judge = PairwiseJudge(LLMJudge("g", engine=Letters(model_id="g"), prompt_style="completion"))
    assert judge._letters() == (" A", " B")
    prompt = judge._prompt("Q?", "x", "y")
    assert isinstance(prompt, str) and prompt.endswith("Better:")


def test_candidate_pairs_best_over_worst_per_instruction() -> None:
    def row(parent: str, mean: float) -> dict[str, object]:
        scores = {"judge_mean": mean}
        return {
            "sample_id": f"{parent}-{mean}",
            "kind": "sft",
            "provenance": {"parent_id": parent},
            "scores": scores,
        }

    rows = [row("p1", 5.0), row("p1", 8.0), row("p1", 2.0), row("p2", 6.0), row("p3", 4.0), row("p3", 7.0)]
    assert sorted(candidate_pairs(rows)) == [(1, 2), (5, 4)]
    assert sorted(candidate_pairs(rows, margin=4.0)) == [(1, 2)]  # p3's gap of 3 is under the margin
