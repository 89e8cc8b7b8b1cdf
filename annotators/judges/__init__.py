"""The judge panel: verifiers first, then LLM judges and non-LLM scorers behind one interface, each
weighted by what it earned on the batch, and their one aggregate."""

from ptfactory.annotators.judges.base import SELF, Judge, JudgeStats, Vote
from ptfactory.annotators.judges.calibration_store import CalibrationStore
from ptfactory.annotators.judges.llm import LLMJudge, parse_vote
from ptfactory.annotators.judges.panel import Panel, PanelReport, krippendorff_alpha
from ptfactory.annotators.judges.scorers import RelevanceJudge
from ptfactory.annotators.judges.verifiers import VerifierSet
from ptfactory.annotators.judges.vote_columns import Aggregate, aggregate
from ptfactory.annotators.judges.weights import JudgeWeight

__all__ = [
    "SELF",
    "Aggregate",
    "CalibrationStore",
    "Judge",
    "JudgeStats",
    "JudgeWeight",
    "LLMJudge",
    "Panel",
    "PanelReport",
    "RelevanceJudge",
    "VerifierSet",
    "Vote",
    "aggregate",
    "krippendorff_alpha",
    "parse_vote",
]
