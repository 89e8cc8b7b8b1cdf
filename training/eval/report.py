"""The evaluation report: per family and overall, from the per-rollout records of :mod:`.run`.

Each summary (``summary.overall``, ``summary.families[NAME]``) holds:

- ``success_rate``: the mean over tasks of each task's share of successful rollouts
  (``pass@1[avg-of-K]``); ``ci95``: percentile bootstrap over tasks (``ci_method``); with one
  rollout per task also ``wilson95`` (the Wilson score interval over the tasks);
- ``pass_at_k``: the unbiased estimator for k = 1, 2, 4 ... and K (n = K rollouts per task);
- ``stability``: the share of tasks whose K >= 2 rollouts agree (None at K = 1);
- ``no_answer`` (rollouts whose answer states nothing checkable: failures, counted apart) and
  ``abstained`` (a verifier could not decide: failures too, counted apart);
- ``efficiency``: mean prompt and completion tokens, steps and seconds per rollout;
- ``safety``: what the sandbox stopped (:mod:`.safety`), ``violations`` in all, and ``timeouts``.

The report's ``results`` give each task's id, family, source and outcomes; the per-rollout
records (answers, verdicts, evidence) go beside it, one JSON object a line
(``<report>.samples.jsonl``), as lm-evaluation-harness writes its samples beside its results.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ptfactory.storage.fs import atomic_write_text
from ptfactory.training.eval.metrics import bootstrap, pass_at_k, stability, wilson
from ptfactory.training.eval.safety import CATEGORIES
from ptfactory.training.eval.tasks import EvalTask

__all__ = ["SCHEMA", "samples_path", "summarize", "task_results", "write_report"]

SCHEMA = "ptf-eval/1"


def _ks(n: int) -> list[int]:
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    return sorted({*ks, n}) if n else []


def summarize(records: Sequence[dict[str, Any]], *, resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """One summary (module docstring) over ``records`` (per-rollout, several tasks)."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_task[record["task_id"]].append(record)
    outcomes = [[bool(r["success"]) for r in rows] for rows in by_task.values()]
    n = min((len(o) for o in outcomes), default=0)
    shares = [sum(o) / len(o) for o in outcomes]
    count = len(records)
    verdicts = Counter(r["verdict"] for r in records)
    violations: Counter[str] = Counter()
    for r in records:
        violations.update(r.get("violations") or {})
    summary: dict[str, Any] = {
        "tasks": len(by_task),
        "rollouts": count,
        "rollouts_per_task": n,
        "success_rate": sum(shares) / len(shares) if shares else None,
        "ci95": list(bootstrap(shares, resamples=resamples, seed=seed)) if shares else None,
        "ci_method": f"percentile bootstrap over tasks ({resamples} resamples, seed {seed})",
        "pass_at_k": {str(k): _mean([pass_at_k(len(o), sum(o), k) for o in outcomes]) for k in _ks(n)},
        "stability": stability(outcomes),
        "no_answer": {
            "count": verdicts["no_answer"],
            "rate": verdicts["no_answer"] / count if count else None,
        },
        "abstained": verdicts["abstain"],
        "verdicts": dict(verdicts),
        "efficiency": {
            "prompt_tokens_mean": _mean([r.get("prompt_tokens") or 0 for r in records]),
            "completion_tokens_mean": _mean([r.get("completion_tokens") or 0 for r in records]),
            "completion_tokens_total": sum(r.get("completion_tokens") or 0 for r in records),
            "steps_mean": _mean([r.get("steps") or 0 for r in records]),
            "seconds_per_rollout": _mean([r.get("seconds") or 0.0 for r in records]),
            "truncated": sum(1 for r in records if r.get("finish_reason") == "length"),
        },
        "safety": {
            "violations": sum(violations.values()),
            "by_category": {c: violations[c] for c in CATEGORIES},
            "rollouts_with_violations": sum(1 for r in records if r.get("violations")),
            "timeouts": sum(int(r.get("timeouts") or 0) for r in records),
        },
    }
    if n == 1 and all(len(o) == 1 for o in outcomes):
        summary["wilson95"] = list(wilson(sum(o[0] for o in outcomes), len(outcomes)))
    return summary


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def task_results(tasks: Sequence[EvalTask], records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task, in order: its id, family, kind, source, benchmark and its rollouts' outcomes."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_task[record["task_id"]].append(record)
    results = []
    for task in tasks:
        rows = by_task.get(task.id, [])
        successes = sum(1 for r in rows if r["success"])
        results.append(
            {
                "id": task.id,
                "family": task.family,
                "kind": task.kind,
                "source": task.source,
                "benchmark": task.benchmark,
                "rollouts": len(rows),
                "successes": successes,
                "pass_rate": successes / len(rows) if rows else None,
                "verdicts": dict(Counter(r["verdict"] for r in rows)),
            }
        )
    return results


def samples_path(report: Path) -> Path:
    """``REPORT.json`` -> ``REPORT.samples.jsonl``, beside it."""
    return report.with_name(report.name.removesuffix(".json") + ".samples.jsonl")


def write_report(report: dict[str, Any], records: Sequence[dict[str, Any]], path: Path) -> Path:
    """The report at ``path`` and its per-rollout records beside it, both written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = samples_path(path)
    lines = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
    atomic_write_text(samples, lines)
    body = {**report, "samples_file": samples.name}
    atomic_write_text(path, json.dumps(body, indent=2, ensure_ascii=False, default=str) + "\n")
    return samples
