"""The judge panel: LLM judges and non-LLM scorers behind one interface, and their aggregate."""

from ptfactory.annotators.judges.base import Judge, JudgeStats, Vote
from ptfactory.annotators.judges.llm import LLMJudge, parse_vote
from ptfactory.annotators.judges.panel import Aggregate, Panel, PanelReport, aggregate, krippendorff_alpha
from ptfactory.annotators.judges.scorers import ExecutionJudge, RelevanceJudge

__all__ = [
    "Aggregate",
    "ExecutionJudge",
    "Judge",
    "JudgeStats",
    "LLMJudge",
    "Panel",
    "PanelReport",
    "RelevanceJudge",
    "Vote",
    "aggregate",
    "krippendorff_alpha",
    "parse_vote",
]
