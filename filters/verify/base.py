"""The verifier interface: :class:`Verifier` and the :class:`Verdict` it returns for a row.

A row is a sample record as ``table.to_pylist()`` gives it (schema 3): ``kind``, ``messages``,
``tests`` / ``entry_point``, ``reference``, ``outcome``... Rows built from other tables (``ptf
judge``'s columns, a GRPO batch) take the same shape (:mod:`ptfactory.filters.verify.inputs`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ptfactory.storage.schema import prompt_of, response_of

__all__ = ["OUTCOMES", "Verdict", "Verifier", "canonical_json", "reference_of"]

# pass: verified right. fail: verified wrong (final: never auto-accepted, never a `chosen`).
# partial: the scorer gave part credit (a metric; not a pass, not final). no_answer: the verifier
# applies but the response states nothing it can check. abstain: it cannot decide (not applicable,
# no reference, an infrastructure fault, a timeout) - the reason says which.
OUTCOMES = ("pass", "fail", "partial", "no_answer", "abstain")


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: equal content gives equal bytes (evidence, specs)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Verdict:
    """What one verifier says about one row.

    ``score`` is binary where the verifier decides (1.0 pass, 0.0 fail, partial and no_answer) and
    None when it abstains, so a GRPO reward built on it is binary and an abstention is NaN (TRL's
    "not applicable"). ``partial`` is the scorer's part credit in [0, 1] (the share of assertions
    or constraints that held, reasoning-gym's partial score): recorded, never a pass.
    """

    verifier: str  # the verifier's name (several of one kind may run)
    kind: str  # code | answer | procedural | constraints | agent
    verdict: str  # one of OUTCOMES
    reason: str  # snake_case: tests_passed, wrong_answer, math_verify_timeout, not_applicable...
    score: float | None = None
    partial: float | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in OUTCOMES:
            raise ValueError(f"verdict {self.verdict!r}; allowed: {', '.join(OUTCOMES)}")
        expected = {"pass": 1.0, "abstain": None}.get(self.verdict, 0.0)
        if self.score != expected:
            raise ValueError(f"a {self.verdict} verdict scores {expected}, not {self.score}")

    @property
    def final(self) -> bool:
        """A fail is final: the row is never auto-accepted nor the `chosen` side of a pair."""
        return self.verdict == "fail"

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def decided(self) -> bool:
        """pass or fail: a label other gates can be measured against."""
        return self.verdict in ("pass", "fail")

    def to_record(self) -> dict[str, Any]:
        """The ``scores.verifiers`` element of the sample schema (evidence as canonical JSON)."""
        return {
            "verifier": self.verifier,
            "kind": self.kind,
            "verdict": self.verdict,
            "reason": self.reason,
            "score": self.score,
            "partial": self.partial,
            "final": self.final,
            "evidence": canonical_json(dict(self.evidence)),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Verdict:
        return cls(
            verifier=record["verifier"],
            kind=record["kind"],
            verdict=record["verdict"],
            reason=record["reason"],
            score=record["score"],
            partial=record["partial"],
            evidence=json.loads(record["evidence"] or "{}"),
        )


def reference_of(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """The row's ``reference`` struct ({} when it has none)."""
    return row.get("reference") or {}


class Verifier(ABC):
    """One kind of check. ``applies(row)`` says whether the row carries what the check needs;
    ``verify(row)`` always returns a :class:`Verdict` (``abstain``/``not_applicable`` where it does
    not apply); ``verify_many`` batches (the sandbox fan-out, the math-verify pool)."""

    kind: ClassVar[str] = "abstract"

    def __init__(self, name: str | None = None) -> None:
        self.name = name or self.kind

    @abstractmethod
    def applies(self, row: Mapping[str, Any]) -> bool:
        """The row carries what this check needs (a reference, tests, constraint specs...)."""

    def verify(self, row: Mapping[str, Any]) -> Verdict:
        return self.verify_many([row])[0]

    @abstractmethod
    def verify_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        """One verdict per row, in order."""

    def close(self) -> None:  # noqa: B027 - optional: verifiers without pools hold nothing
        """Release pools (worker processes)."""

    # -- helpers for subclasses ---------------------------------------------------------------

    def verdict(
        self,
        verdict: str,
        reason: str,
        *,
        partial: float | None = None,
        **evidence: Any,
    ) -> Verdict:
        score = {"pass": 1.0, "abstain": None}.get(verdict, 0.0)
        return Verdict(self.name, self.kind, verdict, reason, score, partial, evidence)

    def abstain(self, reason: str, **evidence: Any) -> Verdict:
        return self.verdict("abstain", reason, **evidence)

    def not_applicable(self) -> Verdict:
        return self.abstain("not_applicable")

    @staticmethod
    def response(row: Mapping[str, Any]) -> str:
        """The answer under test: the final assistant turn ("" when the row has none)."""
        return response_of(row.get("messages"))

    @staticmethod
    def prompt(row: Mapping[str, Any]) -> str:
        return prompt_of(row.get("messages"))
