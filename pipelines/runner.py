"""``ptf run``: stage seeds as a new ``batch`` partition and materialize the graph in-process.

The run is recorded in the project's Dagster instance, so ``ptf ui`` shows it like any
other run. Progress comes from polling that instance's event log for the run.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ptfactory.assets.partitions import BATCH_PARTITIONS_NAME
from ptfactory.assets.resources import SettingsResource, factory_resources
from ptfactory.assets.resources.settings import record_batch_config
from ptfactory.config import load_config
from ptfactory.engines.budget import BUDGET_TAG, LEDGER_FILE, BudgetLedger, effective_budget
from ptfactory.filters.privacy.seedfiles import SIDECAR, redact_seed_files
from ptfactory.generators.seeds import read_seeds, seed_files
from ptfactory.pipelines.jobs import FACTORY_JOB
from ptfactory.pipelines.summary import drop_reasons
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.seedstore import SeedStore, batch_name

__all__ = ["RunOutcome", "follow_run", "run_batch"]

_POLL_S = 0.25


@dataclass
class RunOutcome:
    run_id: str
    batch: str
    success: bool
    materializations: dict[str, dict[str, Any]] = field(default_factory=dict)  # asset -> metadata
    step_seconds: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    drops: dict[str, int] = field(default_factory=dict)  # "stage: reason" -> rows dropped
    wall_s: float = 0.0
    budget: dict[str, float] = field(default_factory=dict)  # the run's limits (unset ones absent)
    spent_tokens: int = 0  # what the run's engines sent (cache hits are free)
    spent_usd: float = 0.0
    budget_stops: list[tuple[str, str]] = field(default_factory=list)  # (asset, limit reached)
    budget_exhausted_rows: int = 0  # rows left unfinished or held back by the budget
    publish_partial: bool = False  # budget.publish_partial: a stopped batch publishes what finished


def metadata_values(event: dg.DagsterEvent) -> dict[str, Any]:
    data = event.event_specific_data
    materialization = getattr(data, "materialization", None)
    if materialization is None:
        return {}
    return {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}


_PID_TAG = "ptf/pid"


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's run: not ours to judge
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"ptf" in cmdline  # `ptf` or `python -m ptfactory`: not a reused pid


def reclaim_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Runs of a `ptf run` that was killed (kill -9, power loss) stay STARTED and keep their
    concurrency-pool slots: the next run would wait for the `sandbox` or `gpu` pool forever.
    Mark them failed and free their slots; returns their ids."""
    records = instance.get_run_records(
        dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING])
    )
    reclaimed = []
    for record in records:
        run = record.dagster_run
        owner = run.tags.get(_PID_TAG)
        if owner is None or _alive(owner):
            continue
        instance.report_run_failed(run, "its `ptf run` process died; reclaimed by the next run")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reclaimed.append(run.run_id)
    return reclaimed


def run_batch(
    seeds: Path,
    config_path: Path,
    batch: str | None = None,
    console: Console | None = None,
    tags: dict[str, str] | None = None,
    *,
    budget: dict[str, Any] | None = None,
) -> RunOutcome:
    """Validate ``seeds`` (raising SeedError/ConfigError before anything is written), then run.

    ``budget``: limits over factory.yaml's for this run (``ptf run --budget``), as the run tag
    ``ptf/budget`` the assets read."""
    console = console or Console(stderr=True)
    config = load_config(config_path)
    tags = {**(tags or {}), **({BUDGET_TAG: json.dumps(budget, sort_keys=True)} if budget else {})}
    limits = effective_budget(config.budget, tags.get(BUDGET_TAG))
    tasks = read_seeds(seeds, config.seeds.max_field_chars)
    files = seed_files(seeds)
    batch = batch or batch_name(files, seeds)
    settings = SettingsResource(config_path=str(config_path))
    home = settings.resolved_home
    # personal data and secrets are redacted before the seeds are staged: no copy keeps a raw value
    redacted = redact_seed_files(files, config.privacy)
    SeedStore(home).stage(files, batch, redacted.contents, {SIDECAR: redacted.sidecar()})
    # the batch keeps the config it runs under: whatever acts on it later uses this one
    recorded = record_batch_config(home, batch, config_path)
    console.print(f"[bold]batch[/] {batch}: {len(tasks)} seed tasks from {seeds} (config {recorded.hash})")
    if procedural := config.seeds.procedural.datasets:
        count = config.seeds.procedural.count
        console.print(
            f"  plus up to {count} procedural tasks per family from seeds.procedural: {', '.join(procedural)}"
        )
    if redacted.found:
        found = ", ".join(f"{count} {kind}" for kind, count in sorted(redacted.found.items()))
        console.print(f"  redacted before staging: {found} (types and counts in the rows' decisions)")

    from ptfactory.pipelines.definitions import defs

    instance = dg.DagsterInstance.get()
    if not instance.has_dynamic_partition(BATCH_PARTITIONS_NAME, batch):
        instance.add_dynamic_partitions(BATCH_PARTITIONS_NAME, [batch])
    job = defs.resolve_job_def(FACTORY_JOB)
    for stale in reclaim_dead_runs(instance):
        console.print(f"[yellow]run {stale} was killed mid-way: marked failed, its pool slots freed[/]")
    run_id = str(uuid.uuid4())
    outcome = RunOutcome(
        run_id=run_id,
        batch=batch,
        success=False,
        budget=limits.limits(),
        publish_partial=limits.publish_partial,
    )
    holder: dict[str, Any] = {}

    def execute() -> None:
        try:
            holder["result"] = job.execute_in_process(
                instance=instance,
                partition_key=batch,
                run_id=run_id,
                raise_on_error=False,
                # the progress display replaces Dagster's console log; the full log is in the instance
                run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
                resources=factory_resources(str(config_path)),
                tags={"ptf/batch": batch, _PID_TAG: _owner(), **tags},
            )
        except BaseException as exc:
            holder["error"] = exc

    began = time.monotonic()
    worker = threading.Thread(target=execute, name=f"ptf-run-{batch}", daemon=True)
    started: dict[str, float] = {}
    steps_total = len(list(job.asset_layer.executable_asset_keys)) if job.asset_layer else 1
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        bar = progress.add_task("starting", total=steps_total)
        worker.start()
        cursor: str | None = None
        while True:
            alive = worker.is_alive()  # read before the events, so the last ones are never missed
            records, cursor = follow_run(instance, run_id, cursor)
            for record in records:
                _on_event(record, outcome, started, progress, bar, console)
            if not alive:
                break
            time.sleep(_POLL_S)
    if "error" in holder:
        raise holder["error"]
    outcome.success = bool(holder["result"].success)
    outcome.wall_s = time.monotonic() - began
    store = AssetStore(home)
    if store.exists("routed_samples", batch):
        outcome.drops = dict(drop_reasons(store.read("routed_samples", batch)).most_common())
    ledger = BudgetLedger(settings.state_dir / LEDGER_FILE)
    spent = ledger.spent(run_id=run_id)
    outcome.spent_tokens, outcome.spent_usd = spent.tokens, round(spent.usd, 6)
    outcome.budget_stops = ledger.stops(run_id)
    outcome.budget_exhausted_rows = sum(
        int(meta.get("budget_exhausted_rows") or 0) for meta in outcome.materializations.values()
    )
    return outcome


def follow_run(
    instance: dg.DagsterInstance, run_id: str, cursor: str | None, page: int = 1000
) -> tuple[list[Any], str | None]:
    """The run's events after ``cursor`` and the cursor after them: each poll reads only what is
    new (re-reading the whole log every 0.25 s grows with the run, and reads a long run's log
    thousands of times)."""
    entries: list[Any] = []
    while True:
        found = instance.get_records_for_run(run_id, cursor=cursor, limit=page)
        entries.extend(r.event_log_entry for r in found.records)
        cursor = found.cursor or cursor
        if not found.has_more:
            return entries, cursor


def _on_event(  # noqa: PLR0917 - one call site, all positional state of the poll loop
    record: Any,
    outcome: RunOutcome,
    started: dict[str, float],
    progress: Progress,
    bar: Any,
    console: Console,
) -> None:
    event = record.dagster_event
    if event is None:
        return
    step = event.step_key or ""
    kind = event.event_type_value
    if kind == "STEP_START":
        started[step] = record.timestamp
        progress.update(bar, description=f"[cyan]{step}[/]")
    elif kind == "ASSET_MATERIALIZATION":
        asset = event.asset_key.to_user_string() if event.asset_key else step
        outcome.materializations[asset] = metadata_values(event)
    elif kind == "STEP_SUCCESS":
        seconds = record.timestamp - started.get(step, record.timestamp)
        outcome.step_seconds[step] = seconds
        progress.advance(bar)
        console.print(f"  [green]✓[/] {step} [dim]({seconds:.1f}s)[/]")
    elif kind == "STEP_FAILURE":
        error = getattr(event.event_specific_data, "error", None)
        # Dagster wraps the asset's exception; the innermost cause is the sentence for the user.
        while error is not None and error.cause is not None:
            error = error.cause
        message = error.message.strip() if error else "failed"
        outcome.errors.append(f"{step}: {message}")
        console.print(f"  [red]✗[/] {step}: {message}")
