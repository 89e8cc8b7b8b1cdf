"""The numbers an evaluation report gives: success with its interval, pass@k, stability.

- ``pass_at_k(n, c, k)``: the unbiased estimator of Chen et al. (2021, HumanEval) in the
  numerically stable product form lm-evaluation-harness uses (``tasks/cruxeval/utils.py``):
  ``1 - prod(1 - k / arange(n - c + 1, n + 1))``; it needs ``n >= k`` sampled rollouts.
- ``wilson(successes, trials)``: the Wilson score interval (95 %), for one rollout per task,
  where tasks are independent Bernoulli trials.
- ``bootstrap(values)``: the percentile bootstrap over tasks (95 %, seeded), for a task's mean
  over several rollouts (rollouts of one task are not independent: resample tasks, not rollouts).
  The report's ``ci95`` is the bootstrap over tasks; ``wilson95`` is added when K = 1.
- stability: the share of tasks whose K >= 2 sampled rollouts agree (all pass or all fail),
  None at K = 1, where there is nothing to agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["bootstrap", "pass_at_k", "stability", "wilson"]

Z95 = 1.959963984540054


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k draws without replacement from n rollouts, c correct, is correct)."""
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n; got n={n}, c={c}")
    if k < 1 or k > n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n (n={n} rollouts): sample at least k rollouts")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion ((0, 1) for no trials)."""
    if trials <= 0:
        return (0.0, 1.0)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap(
    values: Sequence[float], *, resamples: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (one value per task)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (0.0, 1.0)
    if data.size == 1 or np.all(data == data[0]):
        return (float(data[0]), float(data[0]))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return (float(low), float(high))


def stability(per_task: Sequence[Sequence[bool]]) -> float | None:
    """Share of tasks whose rollouts agree; None when no task has two rollouts."""
    judged = [outcomes for outcomes in per_task if len(outcomes) >= 2]
    if not judged:
        return None
    agree = sum(1 for outcomes in judged if all(outcomes) or not any(outcomes))
    return agree / len(judged)
