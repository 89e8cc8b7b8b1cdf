"""Likelihood scoring: how plausible the model finds the response as an answer to the prompt.

The judge does not rate anything; it reads the log-probability the model gives each token of the
response after the prompt (one prefill, no decoding) and keeps the mean of the lowest ``k`` share
of them (Min-K% Prob, Shi et al. 2023): a wrong number, a mutated operator or an answer to
another question shows up as a few very unlikely tokens, which a plain mean dilutes. The
statistic is mapped onto 1-10 by a logistic with a per-judge ``center`` (the statistic of a
borderline answer, score 5.5) and ``scale``; the defaults were measured with bench/judges.py on the
bundled models, and calibration against expert labels re-weights the judge anyway.

Measured AUC at telling a good response from a bad one (20 pairs a source, bench/judges.py data):
see the README's judge table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["likelihood_score", "min_k_mean"]

MIN_K = 0.2  # share of the response's least likely tokens that the statistic averages


def min_k_mean(logprobs: Sequence[float], k: float = MIN_K) -> float | None:
    """Mean of the lowest ``k`` share of ``logprobs`` (at least one); None for an empty response."""
    finite = sorted(lp for lp in logprobs if math.isfinite(lp))
    if not finite:
        return None if not logprobs else -math.inf
    count = max(1, math.ceil(k * len(finite)))
    return sum(finite[:count]) / count


def likelihood_score(statistic: float, center: float, scale: float) -> float:
    """1-10: 5.5 at ``center``, rising with the statistic (a more plausible answer scores higher)."""
    z = (statistic - center) / scale
    z = max(-30.0, min(30.0, z))
    return 1.0 + 9.0 / (1.0 + math.exp(-z))
