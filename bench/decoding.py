"""Sampled generation on the transformers engine: its decoding loop (ended rows leave the batch)
and sampler (``multinomial``'s draws on the batch, nucleus by ``topk``), one batch at a time and
two batches side by side on one thread each (engines/streams.py), against transformers'
``generate`` with the former sampler (a full-vocabulary sort and one ``multinomial`` per row), one
batch at a time.

    python bench/decoding.py [--prompts 28] [--n 2] [--max-tokens 256] [--repeats 3] [--threads 2]
                             [--sides former,loop,streams,dynamic,packed,nostep]

The requests: the demo's seed instructions (demo/seeds), each answered ``n`` times at the demo's
response settings (temperature 0.7, top-p 0.95). Same model (the bundled SmolLM2), same engine
object, same rows sorted by length, same threads in all (2 streams: 1 each); one batch at a time
holds 32 requests' rows, as the engine did before streams; 2 streams cut the rows into near-equal
batches of at most 32 rows. ``dynamic``: the 2 streams on transformers' ``DynamicCache`` (a
whole-cache copy every step), the cache before engines/kv_cache.py. The other sides read float32
weights; ``packed``: layers read packed bfloat16 copies of them (the default on an AVX-512 CPU), one
batch of at most 32 rows at a time, as the engine then runs, its steps through engines/llama_step.py;
``nostep``: ``packed`` with every step through transformers' forward. Each side runs every
repeat, interleaved. Prints the median seconds, tokens generated and the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache

from ptfactory.engines import kv_cache, transformers_engine
from ptfactory.engines.base import SamplingParams
from ptfactory.engines.kv_cache import GrowingCache
from ptfactory.engines.transformers_engine import TransformersEngine

SEEDS = Path(__file__).resolve().parent.parent / "demo" / "seeds"


class FormerSampler:
    """The sampler before engines/sampling.py: a sort of the whole vocabulary and one multinomial
    per row, each from the row's own generator."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float, device: str) -> None:
        self._generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        self._temperature, self._top_p = temperature, top_p

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(scores.float() / self._temperature, dim=-1)
        if self._top_p < 1.0:
            ordered, index = probs.sort(dim=-1, descending=True)
            drop = ordered.cumsum(dim=-1) - ordered > self._top_p
            probs = torch.zeros_like(probs).scatter(-1, index, ordered.masked_fill(drop, 0.0))
        picked = [
            int(torch.multinomial(probs[r], 1, generator=g).item()) for r, g in enumerate(self._generators)
        ]
        out = torch.full_like(scores, float("-inf"))
        out[torch.arange(len(picked)), torch.tensor(picked)] = 0.0
        return out


def _prompts(count: int) -> list[str]:
    found = []
    for path in sorted(SEEDS.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                seed = json.loads(line)
                found.append("\n\n".join(filter(None, [seed["instruction"], seed.get("input")])))
    return found[:count]


def _generate_with(engine: TransformersEngine, sampler: type) -> Callable[..., list[list[int]]]:
    """The engine's per-batch decoding (``_tokens``) replaced by ``generate`` with ``sampler`` as
    its logits processor (every row of the benchmark's batches has the same settings)."""

    def run(
        encoded: dict[str, Any],
        expand: Sequence[int] | None,
        rules: Sequence[Any],
        params: Sequence[SamplingParams],
        *_: Any,
    ) -> list[list[int]]:
        from transformers import LogitsProcessorList

        if expand is not None:  # generate prefills every row: one copy of the prompt each
            encoded = {k: v[list(expand)] for k, v in encoded.items()}
        processor = sampler([r.seed for r in rules], params[0].temperature, params[0].top_p, "cpu")
        output = engine._model.generate(
            **encoded,
            max_new_tokens=params[0].max_tokens,
            do_sample=False,
            pad_token_id=engine._tokenizer.pad_token_id,
            temperature=None,
            top_p=None,
            top_k=None,
            logits_processor=LogitsProcessorList([processor]),
        )
        width = encoded["input_ids"].shape[1]
        return [row[width:].tolist() for row in output]

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=28)
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--sides",
        default="former,loop,streams",
        help="former: generate + the former sampler; loop: the decoding loop, one batch at a time; "
        "streams: the loop, two batches side by side; dynamic: streams on transformers' "
        "DynamicCache; packed: the loop with float32 layers reading packed bfloat16 weights "
        "(engines/packed_linear.py), one batch at a time, steps by engines/llama_step.py; nostep: "
        "packed, every step through transformers' forward (the first named is the baseline)",
    )
    args = parser.parse_args()

    conversations = [[{"role": "user", "content": p}] for p in _prompts(args.prompts)]
    params = SamplingParams(n=args.n, temperature=0.7, top_p=0.95, max_tokens=args.max_tokens, seed=0)
    engine = TransformersEngine(
        model_id="bundled", model_path="bundled", threads=args.threads, packed_weights=False
    )
    engine._load()
    ours = engine._tokens
    packed = TransformersEngine(
        model_id="bundled", model_path="bundled", threads=args.threads, packed_weights=True
    )
    if {"packed", "nostep"} & set(args.sides.split(",")):
        packed._load()
    step = packed._step
    # (engine, decoder, streams, batch_size, KV cache, Llama step): the engine before streams ran one
    # batch at a time on all threads, a request's n samples in its batch (32 requests: every row of
    # the default run)
    Side = tuple[TransformersEngine, Callable[..., list[list[int]]], int, int, type, Any]
    everything: dict[str, Side] = {
        "generate + former sampler": (
            engine,
            _generate_with(engine, FormerSampler),
            1,
            32 * args.n,
            GrowingCache,
            None,
        ),
        "decoding loop, one batch at a time": (engine, ours, 1, 32 * args.n, GrowingCache, None),
        "decoding loop, 2 streams": (engine, ours, 2, 32, GrowingCache, None),
        "decoding loop, 2 streams, DynamicCache": (engine, ours, 2, 32, DynamicCache, None),
        "decoding loop, packed bfloat16 weights, Llama step, 1 stream": (
            packed,
            packed._tokens,
            1,
            32,
            GrowingCache,
            step,
        ),
        "decoding loop, packed bfloat16 weights, transformers' forward, 1 stream": (
            packed,
            packed._tokens,
            1,
            32,
            GrowingCache,
            None,
        ),
    }
    names = ("former", "loop", "streams", "dynamic", "packed", "nostep")
    keys = dict(zip(names, everything, strict=True))
    sides = {keys[k]: everything[keys[k]] for k in args.sides.split(",")}
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    tokens: dict[str, int] = {}
    for repeat in range(args.repeats):
        for name, (side, decode, streams, batch_size, cache, llama) in sides.items():
            kv_cache.GrowingCache = cache  # type: ignore[misc]  # what decode() builds its cache from
            side._tokens = decode  # type: ignore[method-assign]
            side.streams, side.batch_size, side._step = streams, batch_size, llama
            started = time.perf_counter()
            replies = side._chat(conversations, params)
            seconds[name].append(time.perf_counter() - started)
            tokens[name] = sum(c.completion_tokens for group in replies for c in group)
            print(f"repeat {repeat + 1} {name}: {seconds[name][-1]:.1f} s, {tokens[name]} tokens", flush=True)
    engine._tokens = ours  # type: ignore[method-assign]
    kv_cache.GrowingCache = GrowingCache  # type: ignore[misc]
    print(
        f"\n{len(conversations)} prompts x {args.n} samples, max_tokens {args.max_tokens}, "
        f"{args.threads} threads, median of {args.repeats}; {transformers_engine.__name__}"
    )
    print("| side | median s | tokens | tokens/s |\n|---|---|---|---|")
    medians = {name: statistics.median(times) for name, times in seconds.items()}
    for name, median in medians.items():
        print(f"| {name} | {median:.1f} | {tokens[name]} | {tokens[name] / median:.1f} |")
    first = next(iter(medians))
    for name in list(medians)[1:]:
        print(f"{name} vs {first}: {medians[first] / medians[name]:.2f}x")


if __name__ == "__main__":
    main()
