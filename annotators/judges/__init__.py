"""The judge panel: LLM judges and non-LLM scorers behind one interface, and their aggregate."""

from annotators.judges.base import Judge, JudgeStats, Vote
from annotators.judges.llm import LLMJudge, parse_vote
from annotators.judges.panel import Aggregate, Panel, aggregate, krippendorff_alpha
from annotators.judges.scorers import ExecutionJudge, RelevanceJudge

__all__ = [
    "Aggregate",
    "ExecutionJudge",
    "Judge",
    "JudgeStats",
    "LLMJudge",
    "Panel",
    "RelevanceJudge",
    "Vote",
    "aggregate",
    "krippendorff_alpha",
    "parse_vote",
]
