"""Votes earn their weight on the batch: each judge measured against the verifiers' free labels.

Where verifiers decide some rows of a batch (pass: 1, fail: 0), those rows are labels. Each LLM or
embedding judge's **AUC** against them is measured on the **generator-produced** rows among them
(``provenance.model`` set), not on references against generations: that would reward telling human
text from model text, not right from wrong. Its 95 % interval is a stratified bootstrap (positives
and negatives resampled apart, 1000 times, seed 0: a rerun gives the same interval).

**Weight** = ``2 * AUC - 1`` (Somers' D, the Gini coefficient: 0 at chance, 1 for a judge that
ranks every right answer above every wrong one, the weight a verifier gets), blended with the expert
calibration of the judge's identity when one exists (AUCs averaged by their label counts). Then:

- fewer than :data:`MIN_PER_CLASS` labelled generated rows of either class: the judge's persisted
  weight for its identity (the calibration store), or 0 when it has none (``unmeasured``);
- a batch AUC below :data:`MIN_AUC`: weight 0 for the batch, and the judge is flagged;
- verifiers are never weighed against themselves: they are the labels (weight 1).

A judge that is **near-constant** on the batch (:func:`near_constant`) carries no information and
leaves the mean whatever its weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import rankdata

__all__ = [
    "MIN_AUC",
    "MIN_PER_CLASS",
    "JudgeWeight",
    "Persisted",
    "auc",
    "auc_interval",
    "judge_weight",
    "near_constant",
    "weight_from_auc",
]

MIN_AUC = 0.55
MIN_PER_CLASS = 5
RESAMPLES, SEED = 1000, 0
# near-constant: most counted scores equal (to 0.1), or hardly spread at all (1-10 scale)
CONSTANT_SHARE, CONSTANT_STD, NEAR_CONSTANT_MIN = 0.9, 0.25, 8

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Persisted:
    """What the calibration store holds for a judge identity (annotators/judges/calibration_store.py)."""

    weight: float
    auc: float | None = None
    labels: int = 0  # expert labels behind ``auc`` (0: verifier-measured batches only)
    cut: float | None = None


@dataclass(frozen=True)
class JudgeWeight:
    """A judge's weight on one batch, and where it came from."""

    judge: str
    weight: float
    source: str  # batch | persisted | none (unmeasured: 0) | verifier
    auc: float | None = None
    low: float | None = None
    high: float | None = None
    positives: int = 0  # generated rows a verifier passed, with a counted vote of this judge
    negatives: int = 0
    flagged: bool = False  # measured below MIN_AUC on this batch: weight 0
    constant: bool = False
    left_out: bool = False

    @property
    def unmeasured(self) -> bool:
        return self.source == "none"

    def describe(self) -> str:
        parts = [f"{self.judge}={self.weight:g} ({self.source}"]
        if self.auc is not None:
            interval = f" [{self.low:.2f}, {self.high:.2f}]" if self.low is not None else ""
            parts.append(f", AUC {self.auc:.2f}{interval} on {self.positives}+/{self.negatives}-")
        parts.append(")")
        if self.flagged:
            parts.append(f" flagged: AUC under {MIN_AUC}")
        if self.constant:
            parts.append(" constant: out of the mean")
        if self.left_out:
            parts.append(" left out: too few counted votes")
        return "".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def auc(scores: Array, labels: Array, sample_weight: Array | None = None) -> float | None:
    """P(a positive scores above a negative) + half the ties; weighted by ``sample_weight`` (a
    label's inverse selection probability); None without both classes."""
    scores, labels = np.asarray(scores, np.float64), np.asarray(labels, bool)
    w = np.ones(len(scores)) if sample_weight is None else np.asarray(sample_weight, np.float64)
    positive, negative = w[labels].sum(), w[~labels].sum()
    if positive <= 0 or negative <= 0:
        return None
    order = np.argsort(scores, kind="mergesort")
    s, y, ww = scores[order], labels[order], w[order]
    _, start, counts = np.unique(s, return_index=True, return_counts=True)
    group = np.repeat(np.arange(len(start)), counts)
    neg_in = np.bincount(group, weights=np.where(~y, ww, 0.0), minlength=len(start))
    below = np.concatenate([[0.0], np.cumsum(neg_in)[:-1]])  # negatives strictly below each value
    credit = below[group] + neg_in[group] / 2  # ties count half
    return float(np.sum(np.where(y, ww * credit, 0.0)) / (positive * negative))


def _auc_rows(pos: Array, neg: Array) -> Array:
    """The AUC of each row of (resamples × positives, resamples × negatives), by rank sums."""
    n_pos, n_neg = pos.shape[1], neg.shape[1]
    ranks = rankdata(np.concatenate([pos, neg], axis=1), axis=1)
    result: Array = (ranks[:, :n_pos].sum(axis=1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return result


def auc_interval(scores: Array, labels: Array) -> tuple[float, float] | None:
    """95 % stratified bootstrap interval of :func:`auc` (RESAMPLES, seed SEED)."""
    scores, labels = np.asarray(scores, np.float64), np.asarray(labels, bool)
    pos, neg = scores[labels], scores[~labels]
    if not len(pos) or not len(neg):
        return None
    rng = np.random.default_rng(SEED)
    picks = _auc_rows(
        pos[rng.integers(0, len(pos), (RESAMPLES, len(pos)))],
        neg[rng.integers(0, len(neg), (RESAMPLES, len(neg)))],
    )
    low, high = np.percentile(picks, [2.5, 97.5])
    return float(low), float(high)


def weight_from_auc(value: float) -> float:
    """Somers' D, clamped at 0: a judge worse than chance gets nothing, not a negative weight."""
    return round(max(0.0, 2.0 * value - 1.0), 4)


def near_constant(scores: Array) -> bool:
    """A judge's counted scores on the batch never vary (two or more), or, over at least
    NEAR_CONSTANT_MIN of them, mostly are one value (to 0.1) or hardly vary: such a judge ranks
    nothing (the relevance judge's 10/10 for right and wrong math alike). A handful of votes says
    too little about a spread to drop a judge for it."""
    values = np.asarray(scores, np.float64)
    values = values[~np.isnan(values)]
    if len(values) < 2:
        return False
    if float(np.ptp(values)) == 0.0:
        return True
    if len(values) < NEAR_CONSTANT_MIN:
        return False
    _, counts = np.unique(np.round(values, 1), return_counts=True)
    return bool(counts.max() / len(values) >= CONSTANT_SHARE or float(np.std(values)) < CONSTANT_STD)


def judge_weight(
    judge: str,
    scores: Array,
    labels: Array,
    persisted: Persisted | None,
    *,
    constant: bool = False,
    left_out: bool = False,
) -> JudgeWeight:
    """A judge's weight on a batch from its counted scores on the labelled generated rows
    (``scores``: NaN where its vote did not count; ``labels``: 1 pass, 0 fail, aligned)."""
    values, truth = np.asarray(scores, np.float64), np.asarray(labels, bool)
    keep = ~np.isnan(values)
    values, truth = values[keep], truth[keep]
    positives, negatives = int(truth.sum()), int((~truth).sum())
    flags = {"constant": constant, "left_out": left_out}
    if positives < MIN_PER_CLASS or negatives < MIN_PER_CLASS:
        if persisted is None:
            return JudgeWeight(judge, 0.0, "none", positives=positives, negatives=negatives, **flags)
        weight = 0.0 if constant or left_out else persisted.weight
        return JudgeWeight(
            judge, weight, "persisted", persisted.auc, None, None, positives, negatives, **flags
        )
    measured = auc(values, truth)
    assert measured is not None  # both classes are present
    interval = auc_interval(values, truth)
    low, high = interval if interval is not None else (None, None)
    if measured < MIN_AUC:
        return JudgeWeight(
            judge, 0.0, "batch", round(measured, 4), low, high, positives, negatives, True, **flags
        )
    blended = measured
    if persisted is not None and persisted.auc is not None and persisted.labels > 0:
        n = positives + negatives
        blended = (measured * n + persisted.auc * persisted.labels) / (n + persisted.labels)
    weight = 0.0 if constant or left_out else weight_from_auc(blended)  # either leaves the mean
    return JudgeWeight(judge, weight, "batch", round(measured, 4), low, high, positives, negatives, **flags)


def weights_summary(weights: Mapping[str, JudgeWeight] | Sequence[JudgeWeight]) -> str:
    """One line: each judge's weight, its source and AUC."""
    values = list(weights.values()) if isinstance(weights, Mapping) else list(weights)
    return "; ".join(w.describe() for w in values) or "no judges"
