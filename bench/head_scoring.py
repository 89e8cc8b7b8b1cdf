"""The transformers engine's scoring with the vocabulary head on the read positions only, against
the same engine computing every position's logits (what it did before), on the same rows.

    python bench/head_scoring.py [--model bundled:gemma3-270m] [--repeats 3] [--threads 2]

``score``: 16 (question, answer) pairs, answers of 60-285 tokens (the likelihood judges' and
IFD's request); ``choice_logprobs``: 8 pairwise prompts of 310-460 tokens and the letters " A" /
" B" (the pairwise and probability judges'). Same engine object, same batches, same threads;
the baseline is the engine with ``logits_to_keep`` taken out of every forward call, so each
position's logits are computed and the read ones picked (the values agree: see
tests/engines/test_transformers_engine.py). Prints the median seconds of each side and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from ptfactory.engines import kept_logits
from ptfactory.engines.transformers_engine import TransformersEngine

WORDS = [
    "the",
    "model",
    "reads",
    "every",
    "token",
    "of",
    "the",
    "answer",
    "and",
    "the",
    "question",
    "before",
    "it",
]


def _median(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="bundled:gemma3-270m")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    engine = TransformersEngine(model_id=args.model, model_path=args.model, threads=args.threads)
    model, _ = engine._load()
    prompts = [f"Question: {' '.join(WORDS[: 5 + i % 10])} number {i}?\nAnswer:" for i in range(16)]
    answers = [" " + " ".join((WORDS * 30)[: 60 + 15 * i]) for i in range(16)]
    pairs = [f"{p} {' '.join((WORDS * 40)[: 300 + 20 * i])}\nBetter:" for i, p in enumerate(prompts[:8])]

    def score() -> None:
        engine._score(prompts, answers)

    def choose() -> None:
        engine._choice_logprobs(pairs, [" A", " B"])

    after = (_median(score, args.repeats), _median(choose, args.repeats))
    forward = model.forward

    def every_position(*a: Any, **kw: Any) -> Any:
        kw.pop("logits_to_keep", None)
        return forward(*a, **kw)

    model.forward = every_position
    masked = kept_logits.masked_head
    kept_logits.masked_head = lambda: False  # type: ignore[assignment]  # every position, then pick
    try:
        before = (_median(score, args.repeats), _median(choose, args.repeats))
    finally:
        kept_logits.masked_head = masked
        model.forward = forward
    print(f"{args.model}, {args.threads} threads, median of {args.repeats}")
    print(f"{'request':<34}{'every position s':>18}{'read positions s':>18}{'ratio':>8}")
    for name, b, a in zip(("score (16 answers)", "choice_logprobs (8 pairwise)"), before, after, strict=True):
        print(f"{name:<34}{b:>18.2f}{a:>18.2f}{b / a:>7.2f}x")


if __name__ == "__main__":
    main()
