"""Where IFD falls on the factory's own generations, and how it separates matched from mismatched
instruction/answer pairs: the measurement behind ``difficulty.ifd_min`` / ``ifd_max``.

The generator (default: the bundled SmolLM2-135M-Instruct on the embedded engine) answers every
SFT seed of ``demo/seeds`` as the respond stage asks (the instruction as the user turn; the
factory's response sampling: temperature 0.7, top-p 0.95, 256 tokens), ``--samples`` times each;
the student (the same model by default, as in the demo) scores IFD as the difficulty stage does
(:func:`ptfactory.filters.difficulty.ifd.ifd_scores`: the response after the same chat frame, with
the instruction or an empty user turn). Sources:

- ``generated``: each generated answer under its own instruction (what the difficulty stage sees;
  answers cut at max_tokens left out: the stage drops them as ``truncated`` before IFD);
- ``generated_mismatched``: the same answers under another seed's instruction (an answer the
  instruction does not help predict: what ``instruction_unhelpful`` is for);
- ``reference`` / ``reference_mismatched``: the seeds' own reference answers, under their
  instruction and under another's;
- ``--gsm8k N``: N GSM8K test questions answered the same way (read here only, never written).

Prints per source the quantiles of IFD, the share at or above 1, the share each candidate
``ifd_min`` would drop, what the default band drops, and the AUC of IFD at ranking mismatched
above matched (1.0: IFD tells an answer to another question from an answer to this one every time). ``--old-frame`` adds the IFD
the stage computed before (the unconditioned pass after a bare BOS) for comparison. Answers and
scores are cached (``.ptf/bench-cache/ifd.sqlite``): a rerun regenerates nothing.

    OMP_NUM_THREADS=1 .venv/bin/python bench/ifd.py --samples 3 --old-frame
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from ptfactory.engines.base import Engine, SamplingParams
from ptfactory.engines.spec import EngineSpec, build_engine
from ptfactory.filters.difficulty import DifficultyConfig
from ptfactory.filters.difficulty.ifd import ifd_scores
from ptfactory.generators.seeds import read_seeds

REPO = Path(__file__).resolve().parent.parent
QUANTILES = (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0)
CANDIDATE_MINS = (0.01, 0.02, 0.05, 0.1, 0.2)


def auc(low: list[float], high: list[float]) -> float:
    """P(a value of ``high`` > a value of ``low``), ties half."""
    wins = sum((h > lo) + 0.5 * (h == lo) for h in high for lo in low)
    return wins / (len(high) * len(low)) if high and low else math.nan


def old_frame(student: Engine, prompts: list[str], responses: list[str]) -> list[float]:
    """IFD as the stage computed it before: the unconditioned pass after a bare BOS."""
    cond = student.score([[{"role": "user", "content": p}] for p in prompts], responses)
    free = student.score([[] for _ in prompts], responses)
    return [math.exp(c.mean_nll - f.mean_nll) for c, f in zip(cond, free, strict=True) if c.logprobs]


def show(name: str, values: list[float]) -> None:
    qs = " ".join(f"{q:.3f}" for q in np.quantile(values, QUANTILES)) if values else "-"
    at_one = sum(v >= 1 for v in values) / len(values) if values else math.nan
    drops = (
        " ".join(f"{sum(v < m for v in values) / len(values):5.0%}" for m in CANDIDATE_MINS) if values else ""
    )
    print(f"{name:24s} {len(values):4d}  {qs}  {at_one:6.0%}  {drops}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=Path, default=REPO / "demo" / "seeds")
    parser.add_argument("--samples", type=int, default=3, help="generated answers per instruction")
    parser.add_argument("--gsm8k", type=int, default=0, help="GSM8K test questions to answer too (0: none)")
    parser.add_argument("--model", default="bundled", help="generator and student")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument(
        "--old-frame", action="store_true", help="also the former IFD (bare-BOS unconditioned pass)"
    )
    args = parser.parse_args()

    seeds = [s for s in read_seeds(args.seeds) if s.kind == "sft"]
    prompts = [s.prompt for s in seeds]
    if args.gsm8k:
        import json
        import sys

        sys.path.insert(0, str(REPO))
        from bench.judge_data import data_file

        with data_file("gsm8k").open(encoding="utf-8") as handle:
            prompts += [
                json.loads(line)["question"] for _, line in zip(range(args.gsm8k), handle, strict=False)
            ]
    engine = build_engine(
        EngineSpec(model=args.model, batch_size=8), REPO / ".ptf" / "bench-cache" / "ifd.sqlite"
    )
    params = SamplingParams(n=args.samples, temperature=0.7, top_p=0.95, max_tokens=args.max_tokens, seed=0)
    try:
        replies = engine.chat([[{"role": "user", "content": p}] for p in prompts], params)
        generated = [
            (i, c.text)
            for i, cs in enumerate(replies)
            for c in cs
            if c.finish_reason != "length" and c.text.strip()
        ]
        cut = sum(c.finish_reason == "length" for cs in replies for c in cs)
        shift = len(prompts) // 2  # another instruction, never the answer's own
        pairs: dict[str, list[tuple[str, str]]] = {
            "generated": [(prompts[i], text) for i, text in generated],
            "generated_mismatched": [(prompts[(i + shift) % len(prompts)], text) for i, text in generated],
        }
        refs = [(s.prompt, s.response) for s in seeds if s.response]
        pairs["reference"] = [(p, r) for p, r in refs]
        pairs["reference_mismatched"] = [
            (refs[(i + len(refs) // 2) % len(refs)][0], r) for i, (_, r) in enumerate(refs)
        ]
        print(
            f"model {engine.model_id}; {len(prompts)} instructions x {args.samples}; {cut} answers cut at max_tokens (left out)"
        )
        header = " ".join(f"q{int(q * 100):02d}".rjust(5) for q in QUANTILES)
        mins = " ".join(f"<{m:g}".rjust(5) for m in CANDIDATE_MINS)
        print(f"{'source':24s} {'rows':>4s}  {header}  {'>=1':>6s}  {mins}")
        values: dict[str, list[float]] = {}
        for name, items in pairs.items():
            scores = ifd_scores(engine, [p for p, _ in items], [r for _, r in items])
            values[name] = [s.value for s in scores if s is not None]
            show(name, values[name])
            if args.old_frame:
                show(f"  {name} (old frame)", old_frame(engine, [p for p, _ in items], [r for _, r in items]))
        print(
            f"AUC mismatched > matched: generated {auc(values['generated'], values['generated_mismatched']):.3f}, "
            f"reference {auc(values['reference'], values['reference_mismatched']):.3f}"
        )
        band = DifficultyConfig()
        print(f"the default band [{band.ifd_min:g}, {band.ifd_max:g}) drops:")
        for name, got in values.items():
            easy = sum(v < band.ifd_min for v in got) / len(got)
            unhelpful = sum(v >= band.ifd_max for v in got) / len(got)
            print(f"  {name:24s} too_easy {easy:5.1%}  instruction_unhelpful {unhelpful:5.1%}")
        for name, low in (("generated", "generated_mismatched"), ("reference", "reference_mismatched")):
            row_wise = sum(m < s for m, s in zip(values[name], values[low], strict=True)) / len(values[name])
            print(f"{name}: the answer's own instruction gives the lower IFD in {row_wise:.0%} of rows")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
