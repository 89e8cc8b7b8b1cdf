"""A judge gives each row a vote: a 1-10 score, a verdict and a rationale, or an honest failure.

A reply that does not parse is kept (``raw``), marked (``parsed=False``) and left out of the
aggregate; it is never read as a score of 0. A judge that has nothing to say about a row (no
response to compare) abstains: ``score=None``, verdict ``abstain``.

**No model grades itself.** A judge with a ``family`` abstains on every row whose response a model of
that family wrote (``provenance.model``; :mod:`~ptfactory.annotators.judges.identity` says why the
family and not only the weights): verdict ``abstain``, ``method`` :data:`SELF`, the rationale
naming the generator. Abstentions are not losses (``counted_share``), and the row is scored by the
other judges.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ptfactory.annotators.judges.identity import generator_family, identity_key
from ptfactory.storage.schema import prompt_of, response_of

__all__ = ["SELF", "Judge", "JudgeStats", "Vote"]

VERDICTS = ("accept", "reject", "abstain", "unparsed")
SELF = "self"  # the method (the reason) of a judge's abstention on a row its own family wrote


@dataclass
class Vote:
    judge: str
    model: str
    score: float | None
    verdict: str
    rationale: str = ""
    raw: str = ""
    parsed: bool = True
    method: str = ""  # json | probability | likelihood | embedding | verifier | pairwise | unparsed | self
    confidence: float | None = None  # probability votes: 1 - normalised entropy of the score distribution
    identity: str = ""  # the judge's identity key (calibration fits only votes of its current identity)

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
    # the model family (LLM judges: their model's; "embedding" for the relevance judge); a judge
    # abstains on rows its own family wrote. None: no family (it never abstains for that).
    family: str | None = None
    reads: tuple[str, ...] | None = None  # the row fields it reads (None: all)

    @property
    @abstractmethod
    def model(self) -> str:
        """The model behind the votes (recorded with each vote)."""

    @property
    def method(self) -> str:
        """How it scores (an independence key part, and part of its identity)."""
        return "judge"

    def identity(self) -> dict[str, Any]:
        """What decides its numbers (calibration is keyed by :func:`identity_key` of this)."""
        return {"name": self.name, "type": type(self).__name__, "model": self.model, "method": self.method}

    @property
    def identity_key(self) -> str:
        """:func:`~ptfactory.annotators.judges.identity.identity_key` of :meth:`identity`, computed once."""
        cached: str | None = self.__dict__.get("_identity_key")
        if cached is None:
            cached = identity_key(self.identity())
            self.__dict__["_identity_key"] = cached
        return cached

    @abstractmethod
    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        """One vote per row."""

    def own(self, row: dict[str, Any]) -> str | None:
        """The generating model when a model of this judge's family wrote the row, else None."""
        if self.family is None:
            return None
        family = generator_family(row)
        return str((row.get("provenance") or {}).get("model")) if family == self.family else None

    def abstain_self(self, generator: str) -> Vote:
        why = (
            f"self: written by {generator}, of this judge's family ({self.family}); it does not grade itself"
        )
        return Vote(self.name, self.model, None, "abstain", why, method=SELF)

    def judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        owners = [self.own(row) for row in rows]
        others = [row for row, owner in zip(rows, owners, strict=True) if owner is None]
        scored = self._judge(others) if others else []
        if len(scored) == len(others):  # (else the panel names the judge that lost rows)
            given = iter(scored)
            scored = [next(given) if owner is None else self.abstain_self(owner) for owner in owners]
        votes = scored
        key = self.identity_key
        for vote in votes:
            vote.identity = vote.identity or key
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
