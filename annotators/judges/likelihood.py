"""Likelihood scoring: how plausible the model finds the response as an answer to the prompt.

Two statistics, chosen per judge (``scoring``):

- ``likelihood``: the Min-K% Prob of the response's tokens after the prompt (below).
- ``pmi``: how much the instruction raises the response's tokens' log-probability: their mean
  after the instruction minus their mean after the same frame with an empty instruction (the
  judge's own -ln IFD, as difficulty computes it for the student). A likelihood judge scores how
  probable a text is, and the generator's own outputs are the most probable texts there are: on
  the demo's code and math seeds Min-K% ranked the seeds' references under the model's own
  answers (AUC 0.03 and 0.02), so failing generations outranked passing references. The second
  pass prices the text's own fluency. Lines the response copies from the instruction are left out
  of both passes (``novel_lines``). It costs a second prefill per row; where it wins and loses
  against Min-K%: docs/judges.md, "The default judges and their scoring".

Neither rates anything. Min-K% reads the log-probability the model gives each token of the
response after the prompt (one prefill, no decoding) and keeps the mean of the lowest ``k`` share
of them (Min-K% Prob, Shi et al. 2023): a wrong number, a mutated operator or an answer to
another question shows up as a few very unlikely tokens, which a plain mean dilutes. The
statistic is mapped onto 1-10 by a logistic with a per-judge ``center`` (the statistic of a
borderline answer, score 5.5) and ``scale``; the defaults were measured with bench/judges.py on the
bundled models, and calibration against expert labels re-weights the judge anyway.

Measured AUC at telling a good response from a bad one (bench/judges.py): docs/benchmarks.md,
"Judges".
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

__all__ = [
    "DEFAULT_MAPPING",
    "LIKELIHOOD_METHODS",
    "gain_mean",
    "likelihood_score",
    "min_k_mean",
    "novel_lines",
]

MIN_K = 0.2  # share of the response's least likely tokens that the statistic averages
LIKELIHOOD_METHODS = ("likelihood", "pmi")  # the scorings whose statistic maps through a centre
# each statistic's default (centre, scale): Min-K% sits around -3.5 nats for a borderline answer;
# the mean gain's median on the bundled judges' rows of bench/judges.py was 0.6-0.8 nats, and
# 0.2-1.5 spans its 10th to 90th percentile
DEFAULT_MAPPING = {"likelihood": (-3.5, 1.0), "pmi": (0.75, 0.25)}


def min_k_mean(logprobs: Sequence[float], k: float = MIN_K) -> float | None:
    """Mean of the lowest ``k`` share of ``logprobs`` (at least one); None for an empty response."""
    finite = sorted(lp for lp in logprobs if math.isfinite(lp))
    if not finite:
        return None if not logprobs else -math.inf
    count = max(1, math.ceil(k * len(finite)))
    return sum(finite[:count]) / count


def gain_mean(conditioned: Sequence[float], unconditioned: Sequence[float]) -> float | None:
    """Mean log-probability per response token after the instruction minus after the empty frame
    (None for an empty response; both passes score the same tokens, only the frame differs)."""
    if not conditioned or not unconditioned:
        return None
    return sum(conditioned) / len(conditioned) - sum(unconditioned) / len(unconditioned)


_WORD = re.compile(r"\w+")
COPY_SHARE = 0.8  # a line whose word 3-grams are at least this share the instruction's is a copy


def novel_lines(instruction: str, response: str) -> str:
    """The response without the lines it copies from the instruction. A line of three words or
    more is a copy when at least ``COPY_SHARE`` of its word 3-grams (lower-cased ``\\w+`` runs)
    occur in the instruction, so a docstring re-wrapped onto one line or with a word changed still
    counts; a shorter line when its stripped text is one of the instruction's lines. The
    instruction predicts a copied line almost exactly: a restated signature and docstring earned a
    failing function more gain than a passing body (docs/judges.md)."""
    words = [w.lower() for w in _WORD.findall(instruction)]
    grams = {tuple(words[i : i + 3]) for i in range(len(words) - 2)}
    lines = {line.strip() for line in instruction.splitlines() if line.strip()}
    kept = []
    for line in response.splitlines(keepends=True):
        mine = [w.lower() for w in _WORD.findall(line)]
        if len(mine) < 3:
            copied = line.strip() in lines
        else:
            own = [tuple(mine[i : i + 3]) for i in range(len(mine) - 2)]
            copied = sum(g in grams for g in own) >= COPY_SHARE * len(own)
        if not copied:
            kept.append(line)
    return "".join(kept)


def likelihood_score(statistic: float, center: float, scale: float) -> float:
    """1-10: 5.5 at ``center``, rising with the statistic (a more plausible answer scores higher)."""
    z = (statistic - center) / scale
    z = max(-30.0, min(30.0, z))
    return 1.0 + 9.0 / (1.0 + math.exp(-z))
