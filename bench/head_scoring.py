"""The transformers engine's scoring with the vocabulary head on the read positions only, a slice
of the vocabulary at a time, against the same engine holding the read positions' whole logits
(what it did before engines/kept_logits.py's slices) and computing every position's logits (what
it did before that), on the same rows.

    python bench/head_scoring.py [--model bundled:gemma3-270m] [--repeats 3] [--threads 2]

``score``: 16 (question, answer) pairs, answers of 60-285 tokens (the likelihood judges' and
IFD's request); ``choice_logprobs``: 8 pairwise prompts of 310-460 tokens and the letters " A" /
" B" (the pairwise and probability judges'; the last position only, so no slices). Same engine
object, same batches, same threads; the whole-logits sides have the slices turned off, the
every-position side also ``logits_to_keep`` taken out of every forward call, so each position's
logits are computed and the read ones picked (the values agree: see
tests/engines/test_transformers_engine.py and tests/engines/test_sliced_head.py). Prints the
median seconds of each side and the ratios.
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

    sliced = (_median(score, args.repeats), _median(choose, args.repeats))
    model._ptf_sliced_head = False  # kept_logits.sliced_head_fits' answer: the whole-logits path
    read = (_median(score, args.repeats), _median(choose, args.repeats))
    forward = model.forward

    def every_position(*a: Any, **kw: Any) -> Any:
        kw.pop("logits_to_keep", None)
        return forward(*a, **kw)

    model.forward = every_position
    masked = kept_logits.masked_head
    kept_logits.masked_head = lambda: False  # type: ignore[assignment]  # every position, then pick
    try:
        every = (_median(score, args.repeats), _median(choose, args.repeats))
    finally:
        kept_logits.masked_head = masked
        model.forward = forward
        del model._ptf_sliced_head
    print(f"{args.model}, {args.threads} threads, median of {args.repeats}")
    print("| request | every position s | read positions, whole logits s | read positions, sliced s |")
    print("|---|---|---|---|")
    names = ("score (16 answers)", "choice_logprobs (8 pairwise)")
    for name, e, r, s in zip(names, every, read, sliced, strict=True):
        print(f"| {name} | {e:.2f} | {r:.2f} | {s:.2f} |")
        print(f"{name}: read/every {e / r:.2f}x, sliced/whole logits {r / s:.2f}x, sliced/every {e / s:.2f}x")


if __name__ == "__main__":
    main()
