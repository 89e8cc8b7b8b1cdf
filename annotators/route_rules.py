"""Routing's rules over the panel's fields: the verifiers' verdicts, the two-vote rule, the accept
and reject lines, uncertainty and the audit draw (the module docstring of
:mod:`ptfactory.annotators.routing` states them). Whole columns at a time (:class:`_Scores`), and the
row-at-a-time :func:`uncertainty` a reader of one row uses."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from ptfactory.annotators.routing import RoutingConfig

__all__ = ["CONFIDENCE_WEIGHT", "audit_draw", "uncertainty"]

CONFIDENCE_WEIGHT = 3.0


def uncertainty(scores: dict[str, Any] | None) -> float:
    """Spread, + CONFIDENCE_WEIGHT × (1 − confidence) where the votes stated one; infinite when no
    judge vote counted or a verifier could not read the answer (no_answer, partial)."""
    scores = scores or {}
    if scores.get("judge_mean") is None or _unsure(scores.get("verifiers")):
        return float("inf")
    confidence = scores.get("judge_confidence")
    spread = float(scores.get("judge_spread") or 0.0)
    if confidence is None:
        return spread
    return spread + CONFIDENCE_WEIGHT * (1.0 - min(max(float(confidence), 0.0), 1.0))


def _unsure(verdicts: Any) -> bool:
    """A verifier could not read the answer (no_answer, partial) and none failed it."""
    said = {v["verdict"] for v in verdicts or []}
    return bool(said & {"no_answer", "partial"}) and "fail" not in said


def audit_draw(sample_id: str) -> float:
    """A number in [0, 1) fixed by the sample_id: the row is audited when it is below the rate."""
    digest = hashlib.blake2b(f"audit:{sample_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _why(scores: dict[str, Any] | None) -> str:
    scores = scores or {}
    if _unsure(scores.get("verifiers")):
        return "a verifier found no answer it could check (no_answer or partial)"
    if scores.get("judge_mean") is None:
        return "no counted judge vote"
    confidence = scores.get("judge_confidence")
    shown = "none stated" if confidence is None else f"{confidence:.2f}"
    spread = scores.get("judge_spread") or 0.0
    return f"uncertainty {uncertainty(scores):.2f} (spread {spread:.2f}, confidence {shown})"


class _Scores:
    """A table's judge mean, spread and confidence as arrays (with where each is set): the routing
    rules over whole columns, one Python string per decision only where a detail is written."""

    def __init__(self, table: pa.Table) -> None:
        scores = table.column("scores")
        self.mean, self.has_mean = _field(scores, "judge_mean")
        spread, has_spread = _field(scores, "judge_spread")
        self.spread = np.where(has_spread, spread, 0.0)  # `spread or 0.0`
        self.confidence, self.has_confidence = _field(scores, "judge_confidence")
        votes, has_votes = _field(scores, "judge_votes")
        self.votes = np.where(has_votes, votes, 0.0).astype(np.int64)  # null (no panel count): none
        self.failed, self.unsure, self.passed, self.failures = _verdicts(scores)

    def uncertainty(self) -> np.ndarray[Any, Any]:
        """:func:`uncertainty` of every row."""
        stated = CONFIDENCE_WEIGHT * (1.0 - np.clip(self.confidence, 0.0, 1.0))
        spread = self.spread + np.where(self.has_confidence, stated, 0.0)
        return np.where(self.has_mean & ~self.unsure, spread, np.inf)

    def why(self, rows: np.ndarray[Any, Any]) -> list[str]:
        """:func:`_why` of each of ``rows``, from the arrays (the same numbers, the same text)."""
        u, spread, confidence = (a[rows].tolist() for a in (self.uncertainty(), self.spread, self.confidence))
        mean, stated = self.has_mean[rows].tolist(), self.has_confidence[rows].tolist()
        unsure = self.unsure[rows].tolist()
        return [
            "a verifier found no answer it could check (no_answer or partial)"
            if unsure[k]
            else f"uncertainty {u[k]:.2f} (spread {spread[k]:.2f}, confidence "
            + (f"{confidence[k]:.2f})" if stated[k] else "none stated)")
            if mean[k]
            else "no counted judge vote"
            for k in range(len(u))
        ]

    def auto_detail(self, rows: np.ndarray[Any, Any], config: RoutingConfig) -> list[str]:
        """The detail of each of ``rows``' automatic verdict."""
        mean, spread, has = self.mean[rows].tolist(), self.spread[rows].tolist(), self.has_mean[rows].tolist()
        votes, failed = self.votes[rows].tolist(), self.failed[rows].tolist()
        out = []
        for k, row in enumerate(rows.tolist()):
            if failed[k]:
                out.append(f"verifier fail (final): {self.failures.get(row, '')}")
            elif not has[k]:
                out.append(f"no counted judge vote; routing.silent is {config.silent}")
            elif votes[k] < config.min_votes:
                out.append(
                    f"mean {mean[k]:.2f} on {votes[k]} independent counted vote(s), under routing.min_votes "
                    f"{config.min_votes}; routing.silent is {config.silent}"
                )
            else:
                out.append(f"mean {mean[k]:.2f}, spread {spread[k]:.2f}, {votes[k]} independent votes")
        return out


def _verdicts(
    scores: pa.ChunkedArray,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], dict[int, str]]:
    """Per row: a verifier failed it; a verifier found no answer or gave part credit (and none
    failed it); a verifier passed it (and none failed it); for failed rows, which verifier and why."""
    n = len(scores)
    failed, unsure, passed = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    verifiers = pc.struct_field(scores, "verifiers")
    verifiers = verifiers.combine_chunks() if isinstance(verifiers, pa.ChunkedArray) else verifiers
    flat = pc.list_flatten(verifiers)
    failures: dict[int, str] = {}
    if len(flat):
        parents = pc.list_parent_indices(verifiers).to_numpy(False)
        verdict = flat.field("verdict")
        fail = pc.equal(verdict, "fail").fill_null(False).to_numpy(False).astype(bool)
        odd = pc.is_in(verdict, value_set=pa.array(["no_answer", "partial"])).fill_null(False)
        failed[parents[fail]] = True
        unsure[parents[odd.to_numpy(False).astype(bool)]] = True
        passed[parents[pc.equal(verdict, "pass").fill_null(False).to_numpy(False).astype(bool)]] = True
        names, reasons = flat.field("verifier").to_pylist(), flat.field("reason").to_pylist()
        for k in np.flatnonzero(fail).tolist():
            failures.setdefault(int(parents[k]), f"{names[k]}: {reasons[k]}")
    return failed, unsure & ~failed, passed & ~failed, failures


def _field(scores: pa.ChunkedArray, name: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    values = pc.struct_field(scores, name)  # null where the row has no scores at all
    present = values.is_valid().to_numpy(False).astype(bool)
    return np.asarray(values.fill_null(0.0).to_numpy(False), np.float64), present


def _auto(scores: _Scores, preference: np.ndarray[Any, Any], config: RoutingConfig) -> np.ndarray[Any, Any]:
    """The automatic reason of every row (``auto_accept`` / ``auto_reject``), "" for a row that
    needs a human (the rules in the module docstring). A preference candidate is never rejected
    automatically: a low score there means the judges' comparisons contradict the scores that
    ordered the pair, and an expert settles which answer is better."""
    reason = np.full(len(preference), "", dtype=object)
    mean, open_ = scores.mean, ~scores.failed & ~scores.unsure
    decides = scores.has_mean & (scores.votes >= config.min_votes) & open_
    accept = decides & (mean >= config.accept_at) & (scores.spread <= config.max_spread)
    reject = scores.failed | (decides & ~accept & (mean <= config.reject_at) & ~preference)
    reason[accept], reason[reject] = "auto_accept", "auto_reject"
    silent = open_ & ~(accept | reject) & (~scores.has_mean | (scores.votes < config.min_votes))
    if config.silent in ("accept", "reject"):
        reason[silent & (~preference | (config.silent == "accept"))] = f"auto_{config.silent}"
    return reason


def _audit(
    auto: list[int], ids: list[str], config: RoutingConfig, decided: np.ndarray[Any, Any]
) -> tuple[list[int], float]:
    """The drawn automatic verdicts (rows in ``auto`` no verifier decided) that go to blind review,
    within their own budget: the lowest draws (a share ``audit_rate``, at least ``audit_min``), ties
    by row; and each one's probability of being drawn."""
    pool = [i for i in auto if not decided[i]]
    if config.audit_rate <= 0 or config.audit_budget == 0 or not pool:
        return [], 0.0  # nothing can be drawn: no row's hash needs computing
    ranked = sorted((audit_draw(ids[i]), i) for i in pool)
    wanted = max(sum(1 for draw, _ in ranked if draw < config.audit_rate), min(config.audit_min, len(pool)))
    picked = [i for _, i in ranked[: min(wanted, config.audit_budget)]]
    return picked, len(picked) / len(pool)
