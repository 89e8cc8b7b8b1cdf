"""Judge bench: how well each judge, and the panel, tells a good response from a bad one.

    python bench/judges.py [--rows 6] [--config factory.yaml] [--sources gsm8k,humaneval,writingbench]
                           [--json OUT] [--reuse-cache]

Per source, ``--rows`` labelled pairs (bench/judge_data.py says how they are made) are scored by the
configured panel through ``score_table``, as ``ptf judge`` does; the judges see the prompt and the
response only, never a reference answer. HumanEval rows carry their tests, so the execution judge
runs them in the sandbox, as it does in the factory. Printed per source and judge: AUC at telling
good (1) from bad (0) over the pairs where both votes counted, with a 95% bootstrap interval (1000
resamples of pairs, seed 0); the share of its votes that counted; its seconds per 100 rows. The
panel row is ``judge_mean``. Judges read from a fresh response cache (``--reuse-cache``: the
project's), so the timings are real; WritingBench responses are generated once with the
configured generator and kept in the project's response cache.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.judge_data import gsm8k_pairs, humaneval_pairs, to_table, writingbench_pairs
from ptfactory.annotators.judges.base import Judge
from ptfactory.annotators.judges.standalone import score_table
from ptfactory.assets.resources import FactoryResource
from ptfactory.filters.execution import Limits, open_sandbox

SOURCES = ("gsm8k", "humaneval", "writingbench")
Floats = npt.NDArray[np.float64]
WARM_UP: list[dict[str, object]] = [
    {
        "sample_id": "warm-up",
        "kind": "sft",
        "scores": None,
        "tests": None,
        "entry_point": None,
        "messages": [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi!"}],
    }
]
RESAMPLES, SEED = 1000, 0


def _mann_whitney(good: Floats, bad: Floats) -> Any:
    """P(good > bad) + P(tie) / 2: the AUC, for 1-D arrays (or rows of 2-D arrays, vectorised)."""
    greater = (good[..., :, None] > bad[..., None, :]).mean(axis=(-1, -2))
    ties = (good[..., :, None] == bad[..., None, :]).mean(axis=(-1, -2))
    return greater + ties / 2


def auc(good: Floats, bad: Floats) -> float:
    try:
        from sklearn.metrics import roc_auc_score  # type: ignore[import-untyped]
    except ImportError:
        return float(_mann_whitney(good, bad))
    labels = np.r_[np.ones(len(good)), np.zeros(len(bad))]
    return float(roc_auc_score(labels, np.r_[good, bad]))


def auc_interval(good: Floats, bad: Floats) -> tuple[float, float]:
    """95% percentile interval over resampled pairs (good and bad of a pair stay together)."""
    picks = np.random.default_rng(SEED).integers(0, len(good), size=(RESAMPLES, len(good)))
    values = _mann_whitney(good[picks], bad[picks])
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _timed(judges: list[Judge]) -> dict[str, float]:
    """Seconds each judge spends voting (wrapped in place; the panel calls them in turn)."""
    seconds = {j.name: 0.0 for j in judges}
    for judge in judges:

        def timed(rows: Any, _judge: Callable[..., Any] = judge.judge, _name: str = judge.name) -> Any:
            started = time.perf_counter()
            try:
                return _judge(rows)
            finally:
                seconds[_name] += time.perf_counter() - started

        judge.judge = timed  # type: ignore[method-assign]
    return seconds


def _pairs(source: str, rows: int, resource: FactoryResource, sandbox: Any, limits: Limits) -> list[Any]:
    if source == "gsm8k":
        return gsm8k_pairs(rows)
    if source == "humaneval":
        return humaneval_pairs(rows, sandbox, limits)
    return writingbench_pairs(rows, resource.engine("generator"))


def _score_source(
    source: str, table: Any, panel: Any, seconds: dict[str, float], sandbox: Any
) -> dict[str, Any]:
    before = {j.name: (j.stats.votes, j.stats.unparsed, j.stats.abstained) for j in panel.judges}
    spent = dict(seconds)
    started = time.perf_counter()
    scored = score_table(table, panel, sandbox=sandbox, limits=Limits(timeout_s=5))
    wall = time.perf_counter() - started
    labels = np.array(scored.column("label").to_pylist())
    pairs = np.array(scored.column("pair").to_pylist())
    results = []
    for name, column in [
        *((j.name, f"judge_{j.name}") for j in panel.judges),
        ("panel (mean)", "judge_mean"),
    ]:
        values = np.array([np.nan if v is None else v for v in scored.column(column).to_pylist()], float)
        good = {p: v for p, v, lab in zip(pairs, values, labels, strict=True) if lab == 1}
        bad = {p: v for p, v, lab in zip(pairs, values, labels, strict=True) if lab == 0}
        both = [p for p in good if p in bad and not np.isnan(good[p]) and not np.isnan(bad[p])]
        g, b = np.array([good[p] for p in both]), np.array([bad[p] for p in both])
        row: dict[str, Any] = {"source": source, "judge": name, "pairs": len(both)}
        row["auc"] = auc(g, b) if len(both) >= 2 else None
        row["auc_95"] = auc_interval(g, b) if len(both) >= 2 else None
        judge = next((j for j in panel.judges if j.name == name), None)
        if judge is not None:
            votes, unparsed, abstained = (
                a - z
                for a, z in zip(
                    (judge.stats.votes, judge.stats.unparsed, judge.stats.abstained),
                    before[name],
                    strict=True,
                )
            )
            row["abstains"] = votes > 0 and abstained == votes
            row["counted"] = (votes - unparsed - abstained) / votes if votes else None
            row["s_per_100"] = (seconds[name] - spent[name]) / len(labels) * 100
        else:
            row["abstains"], row["counted"] = False, float(np.mean(~np.isnan(values)))
            row["s_per_100"] = wall / len(labels) * 100
        results.append(row)
    return {"rows": scored, "results": results, "seconds": wall}


def pooled_auc(tables: list[Any], judges: list[str]) -> list[tuple[str, float | None, int]]:
    """Per judge and for the panel: AUC over the pairs of every source where both votes counted."""
    rows = [r for t in tables for r in t.select(["source", "pair", "label", *_columns(judges)]).to_pylist()]
    out = []
    for name, column in [*((j, f"judge_{j}") for j in judges), ("panel (mean)", "judge_mean")]:
        good = {
            (r["source"], r["pair"]): r[column] for r in rows if r["label"] == 1 and r[column] is not None
        }
        bad = {(r["source"], r["pair"]): r[column] for r in rows if r["label"] == 0 and r[column] is not None}
        both = [k for k in good if k in bad]
        g, b = np.array([good[k] for k in both]), np.array([bad[k] for k in both])
        out.append((name, auc(g, b) if len(both) >= 2 else None, len(both)))
    return out


def _columns(judges: list[str]) -> list[str]:
    return [*(f"judge_{j}" for j in judges), "judge_mean"]


def _line(row: dict[str, Any]) -> str:
    if row["abstains"]:
        return f"  {row['judge']:<22} {'n/a (abstains)':<24} {'n/a':>8} {row['s_per_100']:>10.1f}"
    if row["auc"] is None:
        auc_text = f"n/a ({row['pairs']} pairs)"
    else:
        low, high = row["auc_95"]
        auc_text = f"{row['auc']:.2f} [{low:.2f}, {high:.2f}]"
    counted = f"{row['counted']:.0%}" if row["counted"] is not None else "n/a"
    return f"  {row['judge']:<22} {auc_text:<24} {counted:>8} {row['s_per_100']:>10.1f}"


def _header(rows: int, panel: Any, config: Path, loaded: float, backend: str) -> str:
    judges = ", ".join(f"{j.name} ({j.model})" for j in panel.judges)
    return (
        f"judge bench: {rows} pairs per source; panel {judges}; config "
        f"{config if config.exists() else 'defaults'}; models loaded in {loaded:.0f} s (not timed below)\n"
        "judges see the prompt and the response only (no reference answer); HumanEval rows carry their "
        f"tests, so the execution judge runs them in the {backend} sandbox (mutants were chosen to fail "
        "them: its AUC there is 1 by construction)\n"
        "AUC: good=1 vs bad=0 over pairs where both votes counted [95% bootstrap, 1000 resamples of "
        "pairs]; counted: share of the judge's votes that counted; s/100: its seconds per 100 rows "
        "(panel: wall time of score_table, sandbox runs included)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=6, help="pairs per source (each pair is 2 rows)")
    parser.add_argument(
        "--config", type=Path, default=Path("factory.yaml"), help="factory.yaml with the panel"
    )
    parser.add_argument("--sources", default=",".join(SOURCES), help="comma-separated: " + ", ".join(SOURCES))
    parser.add_argument("--json", type=Path, help="save the results and the scored rows here")
    parser.add_argument("--reuse-cache", action="store_true", help="judges read the project's response cache")
    args = parser.parse_args()
    begun = time.perf_counter()
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown:
        raise SystemExit(f"unknown source(s) {', '.join(unknown)}; sources: {', '.join(SOURCES)}")
    config = args.config.resolve()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    generator = FactoryResource(config_path=str(config))  # its response cache keeps WritingBench responses
    scratch = tempfile.TemporaryDirectory(prefix="ptf-judge-bench-")
    judging = generator if args.reuse_cache else FactoryResource(config_path=str(config), home=scratch.name)
    panel = judging.panel()
    loading = time.perf_counter()
    panel.vote(WARM_UP)  # models load here, not inside the first source's timings
    loaded = time.perf_counter() - loading
    seconds = _timed(panel.judges)
    limits = Limits(timeout_s=5)
    settings = generator.config.sandbox
    sandbox = open_sandbox(limits, settings.workers, settings.backend) if "humaneval" in sources else None
    started = time.perf_counter()
    print(_header(args.rows, panel, config, loaded, sandbox.backend if sandbox else "no"))
    results, tables = [], []
    try:
        for source in sources:
            made = time.perf_counter()
            pairs = _pairs(source, args.rows, generator, sandbox, limits)
            built = time.perf_counter() - made
            if not pairs:
                print(f"\n{source}: no pairs could be built; skipped")
                continue
            outcome = _score_source(source, to_table(pairs), panel, seconds, sandbox)
            results.extend(outcome["results"])
            tables.append(outcome["rows"])
            kinds = Counter(p.how.split(" ")[1] for p in pairs) if source == "humaneval" else Counter()
            print(
                f"\n{source}: {len(pairs)} pairs, {2 * len(pairs)} rows; data {built:.1f} s, judging "
                f"{outcome['seconds']:.1f} s ({outcome['seconds'] / (2 * len(pairs)) * 100:.1f} s/100 rows)"
                + (f"; mutants: {', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}" if kinds else "")
            )
            print(f"  {'judge':<22} {'AUC [95% CI]':<24} {'counted':>8} {'s/100':>10}")
            for row in outcome["results"]:
                print(_line(row))
    finally:
        if sandbox is not None:
            sandbox.close()
        for resource in {id(r): r for r in (generator, judging)}.values():
            resource.teardown_after_execution(None)  # type: ignore[arg-type]
        scratch.cleanup()
    if len(tables) > 1:
        print("\nall sources pooled (pairs of every source; a judge that abstains on a source has fewer)")
        for name, auc_, pairs in pooled_auc(tables, [j.name for j in panel.judges]):
            print(f"  {name:<22} {'n/a' if auc_ is None else f'{auc_:.2f}':<24} {pairs:>8} pairs")
    print(
        f"\ntotal {time.perf_counter() - begun:.0f} s (benched {time.perf_counter() - started:.0f} s "
        f"after {loaded:.0f} s of model loading)"
    )
    if args.json:
        rows = [r for t in tables for r in t.drop_columns(["tests"]).to_pylist()]
        args.json.write_text(json.dumps({"results": results, "rows": rows}, indent=1, default=str))
        print(f"saved {args.json}")


if __name__ == "__main__":
    main()
