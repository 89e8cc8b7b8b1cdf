"""What ``ptf annotate push`` / ``pull`` run: the review and curation jobs, in-process, recorded in
the project's Dagster instance like any other run, each batch under its recorded config."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from ptfactory import errors
from ptfactory.annotators.labelstudio.sync import PullResult
from ptfactory.assets.partitions import BATCH_PARTITIONS_NAME
from ptfactory.assets.resources import LabelStudioResource, SettingsResource, factory_resources
from ptfactory.errors import FactoryError, UserInputError
from ptfactory.pipelines.jobs import CURATION_JOB, REVIEW_JOB
from ptfactory.pipelines.runner import metadata_values

__all__ = ["JobOutcome", "pull_and_curate", "push_batches"]

_QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass
class JobOutcome:
    runs: list[str] = field(default_factory=list)
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)  # asset[/partition] -> metadata
    pulled: PullResult | None = None
    skipped: dict[str, str] = field(default_factory=dict)  # batch -> why it was left out


def _metadata(result: dg.ExecuteInProcessResult, suffix: str = "") -> dict[str, dict[str, Any]]:
    return {
        event.asset_key.to_user_string() + suffix: metadata_values(event)
        for event in result.get_asset_materialization_events()
        if event.asset_key is not None
    }


def _failed(result: dg.ExecuteInProcessResult) -> str:
    """The innermost cause of each failed step: the sentence meant for the user."""
    messages = []
    for event in result.all_events:
        if not event.is_step_failure or event.step_failure_data is None:
            continue
        chain = []
        error = event.step_failure_data.error
        while error is not None:
            chain.append(error)
            error = error.cause
        # our own errors are written for the user; below them sit the library's (httpx, ...)
        ours = [e for e in chain if e.cls_name in errors.__all__]
        chosen = ours[-1] if ours else (chain[-1] if chain else None)
        messages.append(chosen.message.strip() if chosen else "step failed")
    return "; ".join(messages) or "run failed"


def push_batches(config_path: Path, batches: list[str] | None = None) -> JobOutcome:
    """Materialize ``review_queue`` (the one pusher): the rows the budgets of ``batches`` gave a
    review slot (default: every batch's), each where its batch's recorded config says."""
    from ptfactory.pipelines.definitions import defs

    instance = dg.DagsterInstance.get()
    known = list(instance.get_dynamic_partitions(BATCH_PARTITIONS_NAME))
    unknown = [b for b in batches or [] if b not in known]
    if unknown:
        raise UserInputError(
            f"no batch named {unknown[0]!r}; known batches: {', '.join(known) or 'none (run `ptf run` first)'}"
        )
    resources = factory_resources(str(config_path))
    settings = SettingsResource(config_path=str(config_path), batch_configs=True)
    store, admitted = settings.asset_store(), set(settings.review_queue().admitted())
    outcome = JobOutcome()
    chosen = []
    for batch in batches or known:
        if batch not in admitted and not store.exists("routed_samples", batch):
            # a batch of this instance whose outputs live in another home, or were deleted: name it
            # and go on, so one such batch never blocks the others
            outcome.skipped[batch] = f"no stored routed_samples under {store.store.root}"
        else:
            chosen.append(batch)
    if batches and not chosen:
        return outcome
    result = defs.resolve_job_def(REVIEW_JOB).execute_in_process(
        instance=instance,
        raise_on_error=False,
        run_config={**_QUIET, "ops": {"review_queue": {"config": {"batches": chosen if batches else []}}}},
        resources=resources,
    )
    outcome.runs.append(result.run_id)
    if not result.success:
        raise FactoryError(f"pushing the review queue failed (run {result.run_id}): {_failed(result)}")
    outcome.metadata.update(_metadata(result))
    return outcome


def pull_and_curate(config_path: Path) -> JobOutcome:
    """Pull new annotations now (what the sensor does each tick), then run the curation job, under
    the newest batch's recorded config (``config_path`` only where no batch recorded one)."""
    from ptfactory.pipelines.definitions import defs

    settings = SettingsResource(config_path=str(config_path), batch_configs=True)
    pulled = LabelStudioResource(settings=settings).pull()
    result = defs.resolve_job_def(CURATION_JOB).execute_in_process(
        instance=dg.DagsterInstance.get(),
        raise_on_error=False,
        run_config=_QUIET,
        resources=factory_resources(str(config_path)),
    )
    if not result.success:
        raise FactoryError(f"curation run {result.run_id} failed: {_failed(result)}")
    return JobOutcome(runs=[result.run_id], metadata=_metadata(result), pulled=pulled)
