"""Fitting a judge to expert labels: its AUC, the cut where its votes turn from reject to accept,
and (likelihood judges) the centre of its score mapping: calibration moves decisions, not only
weights.

**Which labels, weighted how.** Audit rows are drawn at random from the automatic verdicts (each
with a known probability ``p``, written in its routing detail): an unbiased sample of what the panel
decides alone. Disputed rows reached review because the judges disagreed: a biased sample on its
own. Each label is weighted by the inverse of its probability of being reviewed (Horvitz-Thompson):
an audit row stands for ``1 / p`` automatic verdicts; a disputed row for the disputed rows of its
batch that waited (reviewed / disputed). Together they estimate how a judge does over a whole batch.

**The cut.** The threshold on the judge's own score that best separates the weighted labels
(largest Youden J = sensitivity + specificity - 1; ties: the one nearest the default
:data:`~ptfactory.annotators.judges.llm.ACCEPT_AT`). The panel maps a judge's scores piecewise
linearly so that its cut lands on the common accept line (:func:`recentre`); the recorded votes keep
their raw scores. **The centre** (likelihood judges): the same search on the Min-K% statistic the
vote records in ``raw``; the judge's score mapping is moved so a borderline answer sits there, and
its cut is then the mapping's own midpoint (5.5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ptfactory.annotators.judges.llm import ACCEPT_AT
from ptfactory.annotators.judges.weights import auc, weight_from_auc

__all__ = ["LIKELIHOOD_MIDPOINT", "best_cut", "fit_scores", "recentre"]

LIKELIHOOD_MIDPOINT = 5.5  # likelihood_score(centre) (annotators/judges/likelihood.py)
_LOW, _HIGH = 1.0, 10.0

Array = np.ndarray[Any, Any]


def best_cut(values: Array, labels: Array, weights: Array, default: float) -> float | None:
    """The threshold (accept at ``value >= cut``) with the largest weighted Youden J; None without
    both classes."""
    values, labels = np.asarray(values, np.float64), np.asarray(labels, bool)
    w = np.asarray(weights, np.float64)
    positive, negative = w[labels].sum(), w[~labels].sum()
    if positive <= 0 or negative <= 0:
        return None
    unique = np.unique(values)
    candidates = np.concatenate([[unique[0]], (unique[1:] + unique[:-1]) / 2, [unique[-1] + 1e-6]])
    accept = values[None, :] >= candidates[:, None]
    tpr = (accept & labels[None, :]).astype(float) @ w / positive
    tnr = (~accept & ~labels[None, :]).astype(float) @ w / negative
    youden = tpr + tnr - 1
    best = np.flatnonzero(np.isclose(youden, youden.max()))
    pick = best[np.argmin(np.abs(candidates[best] - default))]
    return float(candidates[pick])


def recentre(scores: Array, cut: float, line: float = ACCEPT_AT) -> Array:
    """Scores mapped piecewise linearly (1 -> 1, ``cut`` -> ``line``, 10 -> 10)."""
    cut = min(max(cut, _LOW + 0.5), _HIGH - 0.5)
    s = np.asarray(scores, np.float64)
    below = _LOW + (s - _LOW) * (line - _LOW) / (cut - _LOW)
    above = line + (s - cut) * (_HIGH - line) / (_HIGH - cut)
    out: Array = np.where(s <= cut, below, above)
    return out


def fit_scores(
    scores: Sequence[float],
    labels: Sequence[bool],
    weights: Sequence[float],
    *,
    statistics: Sequence[float | None] | None = None,
) -> dict[str, Any] | None:
    """A judge's fit on its counted votes over labelled rows: ``auc`` (weighted), ``weight``,
    ``labels`` (rows) and ``effective`` (Kish's effective sample size of the weights), ``cut``, and
    for a likelihood judge (``statistics``: the Min-K% statistic of each vote) ``centre``."""
    s, y, w = np.asarray(scores, float), np.asarray(labels, bool), np.asarray(weights, float)
    value = auc(s, y, w)
    if value is None:
        return None
    fit: dict[str, Any] = {
        "auc": round(value, 4),
        "weight": weight_from_auc(value),
        "labels": len(s),
        "effective": round(float(w.sum() ** 2 / np.sum(w**2)), 2),
        "cut": best_cut(s, y, w, ACCEPT_AT),
        "centre": None,
    }
    if statistics is not None:
        known = np.array([x is not None for x in statistics])
        stats = np.array([x if x is not None else np.nan for x in statistics], float)
        if known.sum() >= 2:
            centre = best_cut(stats[known], y[known], w[known], float(np.median(stats[known])))
            if centre is not None:
                fit["centre"] = round(centre, 4)
                fit["cut"] = LIKELIHOOD_MIDPOINT
    if fit["cut"] is not None:
        fit["cut"] = round(float(fit["cut"]), 4)
    return fit
