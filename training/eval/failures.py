"""Failures back into seeds: a seed batch aimed at what an evaluation got wrong.

For each task with a failed rollout:

- a procedural task (a reasoning-gym family): ``per_failure`` new instances of its family, drawn
  with a seed derived from the eval run id (never the evaluated questions themselves);
- an answer, constraints or code task: one evol-instruct variant of its instruction (the
  factory's templates, generators/templates/evol_*.jinja, the operation rotating), written by the
  given engine (factory.yaml's generator). A variant is a new task: it carries no reference, as
  evol-instruct rows never do;
- an agent task: nothing (a rewritten instruction without its workspace is no task); counted.

Never turned into seeds: tasks of an indexed benchmark (``humaneval``, ``gsm8k``: a reworded test
item is still a test item) and tasks whose text collides with the decontamination index. Every
seed written is checked against the index too; a hit is dropped and counted.

Provenance: each seed's ``id`` is ``eval-<run id>:<failed task id>:<how>``, so the seed row and
every row derived from it carry the eval run in ``provenance.seed_task_id`` (``ptf lineage``
shows it); ``<NEW>.provenance.json`` beside the seed file names the run, its report and, per
seed, the task it answers.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptfactory.engines.base import Engine, SamplingParams
from ptfactory.filters.decontamination import NgramIndex, check_texts
from ptfactory.generators.novelty import rouge_l
from ptfactory.generators.procedural import draw_seed_rows, write_seed_file
from ptfactory.generators.prompts import template
from ptfactory.generators.records import parse_instruction
from ptfactory.storage.fs import atomic_write_text
from ptfactory.training.eval.tasks import EvalTask

__all__ = ["FailureSeeds", "failure_seeds", "write_failure_seeds"]

OPERATIONS = ("deepen", "constraints", "broaden")
_UNCHANGED = 0.9  # ROUGE-L to the original at or above this: not a new task


@dataclass
class FailureSeeds:
    run_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # seed-file rows
    answers: dict[str, str] = field(default_factory=dict)  # seed id -> the failed task id it answers
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> failed tasks or seeds left out


def _prefix(run_id: str, task_id: str) -> str:
    return f"eval-{run_id[:12]}:{task_id}"


def _failed(results: Sequence[dict[str, Any]]) -> set[str]:
    return {r["id"] for r in results if r["rollouts"] and r["successes"] < r["rollouts"]}


def _draw_seed(run_id: str, family: str) -> int:
    return int(hashlib.sha256(f"{run_id}:{family}".encode()).hexdigest()[:8], 16)


def _procedural(
    run_id: str, tasks: Sequence[EvalTask], per_failure: int, asked: set[str], out: FailureSeeds
) -> None:
    by_family: dict[str, list[EvalTask]] = defaultdict(list)
    for task in tasks:
        by_family[task.family].append(task)
    for family, failed in by_family.items():
        wanted = per_failure * len(failed)
        rows = draw_seed_rows([family], wanted + len(asked), _draw_seed(run_id, family))
        fresh = [r for r in rows if r["instruction"] not in asked][:wanted]
        for index, row in enumerate(fresh):
            answered = failed[index % len(failed)]
            row["id"] = f"{_prefix(run_id, answered.id)}:new-{row['id']}"
            out.rows.append(row)
            out.answers[row["id"]] = answered.id


def _evolved(run_id: str, tasks: Sequence[EvalTask], engine: Engine, seed: int, out: FailureSeeds) -> None:
    jobs = []
    for index, task in enumerate(tasks):
        operation = OPERATIONS[index % len(OPERATIONS)]
        original = str((task.extra.get("seed") or {}).get("instruction") or task.text)
        jobs.append((task, operation, original, template(f"evol_{operation}")))
    params = SamplingParams(temperature=0.9, top_p=0.95, max_tokens=256, seed=seed)
    replies = engine.chat(
        [[{"role": "user", "content": tpl.render(instruction=original)}] for _, _, original, tpl in jobs],
        params,
    )
    for (task, operation, original, _), (completion,) in zip(jobs, replies, strict=True):
        instruction, failure = parse_instruction(completion.text)
        if instruction is None:
            out.skipped[f"evol_unparseable_{failure}"] += 1
            continue
        if rouge_l(instruction, original) >= _UNCHANGED:
            out.skipped["evol_unchanged"] += 1
            continue
        seed_id = f"{_prefix(run_id, task.id)}:evol-{operation}"
        out.rows.append({"id": seed_id, "instruction": instruction})
        out.answers[seed_id] = task.id


def _dedupe(out: FailureSeeds) -> None:
    """One seed per instruction: a seed file holds each task once (two variants may coincide)."""
    seen: set[str] = set()
    kept = []
    for row in out.rows:
        if row["instruction"] in seen:
            out.skipped["duplicate_seed"] += 1
            out.answers.pop(row["id"], None)
            continue
        seen.add(row["instruction"])
        kept.append(row)
    out.rows = kept


def failure_seeds(
    report: dict[str, Any],
    tasks: Sequence[EvalTask],
    *,
    engine: Engine | None,
    index: NgramIndex | None,
    per_failure: int = 2,
    say: Callable[[str], None] = lambda _: None,
) -> FailureSeeds:
    """The seed rows aimed at ``report``'s failures (module docstring). ``engine`` writes the
    evol-instruct variants (None: none are written, counted); ``index`` is the decontamination
    index (None: no check, which a caller must choose on purpose)."""
    run_id = str(report["run_id"])
    out = FailureSeeds(run_id)
    failed_ids = _failed(report["results"])
    failed = [t for t in tasks if t.id in failed_ids]
    texts = [t.text for t in failed]
    hits = check_texts(texts, index) if index is not None and texts else [None] * len(failed)
    procedural, evolve = [], []
    for task, hit in zip(failed, hits, strict=True):
        if task.benchmark is not None:
            out.skipped["benchmark_task"] += 1
        elif hit is not None:
            out.skipped["indexed_benchmark_item"] += 1
        elif task.kind == "procedural":
            procedural.append(task)
        elif task.kind == "agent":
            out.skipped["agent_task"] += 1
        else:
            evolve.append(task)
    asked = {str((t.extra.get("seed") or {}).get("instruction") or "") for t in tasks}
    _procedural(run_id, procedural, per_failure, asked, out)
    if evolve and engine is None:
        out.skipped["no_engine_for_evol"] += len(evolve)
    elif evolve and engine is not None:
        say(f"evol-instruct variants of {len(evolve)} failed tasks")
        _evolved(run_id, evolve, engine, int(report["config"].get("seed", 0)), out)
    _dedupe(out)
    if index is not None and out.rows:
        seed_texts = [f"{r['instruction']}\n{r.get('answer') or ''}" for r in out.rows]
        kept = []
        for row, hit in zip(out.rows, check_texts(seed_texts, index), strict=True):
            if hit is None:
                kept.append(row)
            else:
                out.skipped["contaminated_seed"] += 1
                out.answers.pop(row["id"], None)
        out.rows = kept
    return out


def write_failure_seeds(
    seeds: FailureSeeds, path: Path, report: dict[str, Any], report_path: Path | None
) -> Path:
    """The seed file (JSONL, atomically) and ``<path>.provenance.json`` beside it."""
    write_seed_file(seeds.rows, path)
    sidecar = path.with_name(path.name.removesuffix(".jsonl") + ".provenance.json")
    body = {
        "eval_run_id": seeds.run_id,
        "report": str(report_path) if report_path else None,
        "model": report["model"],
        "tasks": report["tasks"],
        "seeds": [{"id": r["id"], "answers_task": seeds.answers.get(r["id"])} for r in seeds.rows],
        "skipped": dict(seeds.skipped),
    }
    atomic_write_text(sidecar, json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    return sidecar
