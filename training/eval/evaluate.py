"""``evaluate``: a model on named tasks, one report, stored and linked in lineage.

The report (``REPORT.json``, schema ``ptf-eval/1``; :mod:`.report` for the summaries) holds the run
id, the model (as given, its folder, its hash, the engine's identity), the task specs, the config
with its seeds, the code and library versions, the summary per family and overall, each task's
result (with its ``id``) and the lineage: checkpoint <- version <- batches. A checkpoint ``ptf
train`` wrote gets a copy under ``<checkpoint>/evals/<run id>.json`` and a row in the catalog's
``evaluations`` table, which ``ptf datasets show`` and ``ptf lineage`` read.
"""

from __future__ import annotations

import json
import platform
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ptfactory.engines.base import Engine
from ptfactory.engines.spec import build_engine
from ptfactory.errors import UserInputError
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.commands import CommandPolicy
from ptfactory.training.eval.config import EvalSection
from ptfactory.training.eval.model import EvalModel, model_hash
from ptfactory.training.eval.report import SCHEMA, summarize, task_results, write_report
from ptfactory.training.eval.run import rollouts
from ptfactory.training.eval.tasks import EvalTask, load_tasks
from ptfactory.version import code_version

__all__ = ["EvalResult", "evaluate", "load_all", "record_evaluation"]


@dataclass
class EvalResult:
    run_id: str
    report: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)  # where the report was written

    @property
    def overall(self) -> dict[str, Any]:
        summary: dict[str, Any] = self.report["summary"]["overall"]
        return summary


def load_all(specs: Sequence[str], datasets: Any = None) -> list[EvalTask]:
    """Every spec's tasks; task ids must be unique across them (a report names tasks by id)."""
    tasks: list[EvalTask] = []
    seen: dict[str, str] = {}
    for spec in specs:
        for task in load_tasks(spec, datasets):
            if task.id in seen:
                raise UserInputError(
                    f"--tasks {spec}: task id {task.id!r} ({task.source}) is also {seen[task.id]}; "
                    "ids name results in the report: give each task its own id"
                )
            seen[task.id] = task.source
            tasks.append(task)
    return tasks


def _versions() -> dict[str, str]:
    import torch
    import transformers

    return {
        "ptfactory": code_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def _lineage(model: EvalModel, datasets: Any) -> dict[str, Any] | None:
    """checkpoint <- version <- batches, from the checkpoint's ptf_lineage.json (and the catalog)."""
    if model.lineage is None:
        return None
    trained = dict(model.lineage.get("dataset") or {})
    batches: list[str] | None = None
    if datasets is not None and trained.get("ref"):
        try:
            batches = list(datasets.resolve(trained["ref"]).batches)
        except Exception:  # a checkpoint trained against another home: the names still link it
            batches = None
    return {
        "checkpoint": str(model.checkpoint),
        "training_run_id": model.lineage.get("run_id"),
        "training_kind": model.lineage.get("kind"),
        "dataset": trained.get("name"),
        "version": trained.get("version"),
        "ref": trained.get("ref"),
        "manifest_sha256": trained.get("manifest_sha256"),
        "batches": batches,
    }


def evaluate(
    model: EvalModel,
    specs: Sequence[str],
    settings: EvalSection | None = None,
    *,
    tasks: Sequence[EvalTask] | None = None,
    engine: Engine | None = None,
    cache_path: Path | None = None,
    sandbox: Callable[[], Sandbox] | None = None,
    policy: CommandPolicy | None = None,
    datasets: Any = None,
    out: Path | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> EvalResult:
    """Evaluate ``model`` on the tasks ``specs`` name (or ``tasks``, already loaded); write the
    report to ``out`` and, for a checkpoint, beside it; record it in ``datasets``' catalog."""
    settings = settings or EvalSection()
    started = time.perf_counter()
    chosen = list(tasks) if tasks is not None else load_all(specs, datasets)
    owned = engine is None
    engine = engine or build_engine(model.spec, cache_path)
    try:
        records = rollouts(chosen, engine, settings, sandbox=sandbox, policy=policy, say=say)
        identity = engine.identity()
    finally:
        if owned:
            engine.close()
    run_id = uuid.uuid4().hex
    families: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        families[record["family"]].append(record)
    stats = {"resamples": settings.bootstrap_resamples, "seed": settings.seed}
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": run_id,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": {
            "given": model.given,
            "folder": str(model.folder) if model.folder else None,
            "hash": model_hash(model, identity),
            "engine": identity,
        },
        "tasks": list(specs),
        "config": {**settings.model_dump(mode="json"), "temperature": settings.sampling_temperature()},
        "code_version": code_version(),
        "versions": _versions(),
        "summary": {
            "overall": summarize(records, **stats),
            "families": {name: summarize(rows, **stats) for name, rows in sorted(families.items())},
        },
        "results": task_results(chosen, records),
        "lineage": _lineage(model, datasets),
        "wall_s": round(time.perf_counter() - started, 2),
    }
    result = EvalResult(run_id, report, records)
    if out is not None:
        write_report(report, records, out)
        result.paths.append(out)
    if model.checkpoint is not None:
        beside = model.checkpoint / "evals" / f"{run_id}.json"
        write_report(report, records, beside)
        result.paths.append(beside)
        if datasets is not None:
            record_evaluation(datasets, report, beside)
    return result


def record_evaluation(datasets: Any, report: dict[str, Any], path: Path) -> None:
    """The report's row in the catalog's ``evaluations`` table (what ``ptf datasets show`` lists)."""
    lineage = report.get("lineage") or {}
    overall = report["summary"]["overall"]
    datasets.catalog.execute(
        "INSERT INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            report["run_id"],
            report["model"]["given"],
            lineage.get("checkpoint"),
            lineage.get("training_run_id"),
            lineage.get("dataset"),
            lineage.get("version"),
            json.dumps(report["tasks"]),
            overall["success_rate"],
            json.dumps(overall, default=str),
            str(path),
            report["created_at"],
        ],
    )
