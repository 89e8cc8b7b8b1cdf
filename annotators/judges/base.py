"""A judge gives each row a vote: a 1-10 score, a verdict and a rationale, or an honest failure.

A reply that does not parse is kept (``raw``), marked (``parsed=False``) and left out of the
aggregate; it is never read as a score of 0. A judge that has nothing to say about a row
(execution on a non-code row) abstains: ``score=None``, verdict ``abstain``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ptfactory.storage.schema import prompt_of, response_of

__all__ = ["Judge", "JudgeStats", "Vote"]

VERDICTS = ("accept", "reject", "abstain", "unparsed")


@dataclass
class Vote:
    judge: str
    model: str
    score: float | None
    verdict: str
    rationale: str = ""
    raw: str = ""
    parsed: bool = True
    method: str = ""  # json | probability | embedding | execution | unparsed
    confidence: float | None = None  # probability votes: 1 - normalised entropy of the score distribution

    def to_dict(self) -> dict[str, Any]:
        # every field is a plain value: `dataclasses.asdict`'s deep copy was most of the panel's
        # own time on a large batch (three votes a row)
        return dict(self.__dict__)

    @property
    def counts(self) -> bool:
        """Does this vote enter the aggregate?"""
        return self.parsed and self.score is not None


@dataclass
class JudgeStats:
    votes: int = 0
    unparsed: int = 0
    abstained: int = 0
    by_method: dict[str, int] = field(default_factory=dict)  # counted votes: json / probability / ...
    prompt_tokens: int = 0
    completion_tokens: int = 0
    price_per_mtok: float = 0.0

    @property
    def parse_failure_rate(self) -> float:
        return self.unparsed / self.votes if self.votes else 0.0

    @property
    def counted_share(self) -> float | None:
        """Counted votes over the votes that tried to score (abstentions are not losses)."""
        tried = self.votes - self.abstained
        return (tried - self.unparsed) / tried if tried else None

    def share(self, method: str) -> float:
        tried = self.votes - self.abstained
        return self.by_method.get(method, 0) / tried if tried else 0.0

    @property
    def cost_usd(self) -> float:
        return (self.prompt_tokens + self.completion_tokens) * self.price_per_mtok / 1e6


@dataclass
class Judge(ABC):
    name: str
    stats: JudgeStats = field(default_factory=JudgeStats)

    @property
    @abstractmethod
    def model(self) -> str:
        """The model behind the votes (recorded with each vote)."""

    @abstractmethod
    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        """One vote per row."""

    def judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        votes = self._judge(rows)
        self.stats.votes += len(votes)
        self.stats.unparsed += sum(1 for v in votes if not v.parsed)
        self.stats.abstained += sum(1 for v in votes if v.parsed and v.score is None)
        for vote in votes:
            if vote.counts:
                self.stats.by_method[vote.method] = self.stats.by_method.get(vote.method, 0) + 1
        return votes


def prompt_and_response(row: dict[str, Any]) -> tuple[str, str]:
    """What a judge reads: the first user turn, and the final turn if it is the assistant's."""
    messages = row["messages"]
    return prompt_of(messages), response_of(messages)
