"""``rl_dataset``: verifiable prompts that passed the gates, kept where the student solves them
sometimes but not always, published as an ``rl`` version (what ``ptf train grpo`` reads).

From every curated row so far: rows a verifier can check (code with tests, a reference answer, a
procedural family, constraints) get the student's pass rate, the one the difficulty stage measured
or else one measured here (training/rl.py: at most ``rl.max_prompts`` prompts a run, ``rl.k``
attempts each, kept under PTF_HOME so a prompt is measured once); ``assemble_rl`` keeps the rows
inside the band (``rl.min_pass_rate``, ``rl.max_pass_rate``) and the version is published by the
same path as sft and preference (assets/datasets.py: split, audit, delta over the latest, rebase).
"""

from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.assets.audit import AUDIT_CHECKS
from ptfactory.assets.common import check_specs, counts_md, engine_metadata, preview_md
from ptfactory.assets.datasets import audit_check_results, publish_assembled
from ptfactory.assets.pools import GPU_POOL
from ptfactory.assets.resources.engines import EnginesResource
from ptfactory.assets.resources.sandbox import SandboxResource
from ptfactory.assets.resources.settings import PARTITION_TAG, SettingsResource
from ptfactory.assets.version_figures import decontamination_stats, figures_metadata, remember_prompts
from ptfactory.config import FactoryConfig
from ptfactory.engines.base import Engine
from ptfactory.engines.budget import (
    BUDGET_TAG,
    LEDGER_FILE,
    BudgetExhausted,
    BudgetGuard,
    BudgetLedger,
    effective_budget,
)
from ptfactory.storage.assemble import assemble_rl
from ptfactory.storage.retract import retracted
from ptfactory.training.rl import Measured, RLSection, measure

__all__ = ["MEASURED_ASSET", "rl_dataset", "rl_settings"]

MEASURED_ASSET = "rl_pass_rates"  # the student's measured pass rates, kept between runs


def rl_settings(config: FactoryConfig) -> RLSection:
    """factory.yaml's ``rl:`` section."""
    return config.rl


def _student(config: FactoryConfig) -> str:
    spec = config.engines.student
    return f"{spec.backend}:{spec.model}"


def _measure(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    sandbox: SandboxResource,
    *,
    curated: pa.Table,
    section: RLSection,
) -> tuple[Measured, list[tuple[Engine, dict[str, float]]], str | None]:
    """The pass rates (training/rl.py: measure), the student's attempts metered by the run's budget
    like every stage's; kept under PTF_HOME so a prompt is measured once. Returns the measurement,
    the engines built with their stats before, and the limit that stopped measuring (None: none)."""
    config = settings.config
    store = settings.asset_store()
    known = store.read(MEASURED_ASSET) if store.exists(MEASURED_ASSET) else None
    guard = BudgetGuard(
        budget=effective_budget(config.budget, context.run.tags.get(BUDGET_TAG)),
        ledger=BudgetLedger(settings.state_dir / LEDGER_FILE),
        run_id=context.run.run_id,
        batch=context.run.tags.get(PARTITION_TAG, ""),
        asset="rl_dataset",
    )
    built: list[tuple[Engine, dict[str, float]]] = []

    def student() -> Engine:  # loaded only when a prompt is measured
        engine = engines.engine("student")
        built.append((engine, engine.stats.__dict__.copy()))
        engine.budget = guard.meter(engines.price_per_mtok("student"))
        return engine

    def run(limit: int) -> Measured:
        return measure(
            curated,
            student,
            section=section.model_copy(update={"max_prompts": limit}),
            student=_student(config),
            known=known,
            sandbox=sandbox.local,
            say=context.log.info,
        )

    try:
        measured = run(section.max_prompts)
    except BudgetExhausted as stop:
        # the run reached its budget: this run measures nothing more (earlier measurements still count)
        context.log.warning(f"rl_dataset: pass rates not measured: {stop}")
        measured = run(0)
    finally:
        for engine, _ in built:
            engine.budget = None
    if measured.new.num_rows:
        store.write(
            MEASURED_ASSET, measured.new if known is None else pa.concat_tables([known, measured.new])
        )
    return measured, built, guard.stopped


@dg.asset(
    group_name="publish",
    kinds={"parquet"},
    pool=GPU_POOL,  # the student engine, when a prompt needs its pass rate measured (assets/pools.py)
    check_specs=check_specs("rl_dataset", AUDIT_CHECKS, blocking=True),
)
def rl_dataset(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    sandbox: SandboxResource,
    curated_samples: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """The rl dataset: a new version under PTF_HOME/datasets/<rl.name>/v<N>/ when its rows changed.

    One row per verifiable prompt that passed the gates (the prompt, its reference or tests, the
    student's pass rate), kept when the pass rate lies strictly inside the band; nothing published
    while no row qualifies (no empty v1)."""
    config = settings.config
    section = rl_settings(config)
    measured, built, stopped = _measure(
        context, settings, engines, sandbox, curated=curated_samples, section=section
    )
    assembled = assemble_rl(measured.table, section.band())
    datasets = settings.datasets()
    name = section.name
    taken_out = retracted(datasets, name)
    if taken_out:  # `ptf datasets retract` took these rows out: curation never brings them back
        mask = taken_out.mask(assembled.table)
        kept_rows = assembled.table.filter(pc.invert(mask))
        assembled.skipped["retracted"] = assembled.table.num_rows - kept_rows.num_rows
        assembled.table = kept_rows
        assembled.batches = sorted(set(kept_rows.column("batch").to_pylist()))
    cost: dict[str, dg.MetadataValue] = {
        "prompts_measured": dg.MetadataValue.int(measured.measured),
        "student_attempts": dg.MetadataValue.int(measured.measured * section.k),
        "prompts_reused": dg.MetadataValue.int(measured.reused),
        "prompts_waiting": dg.MetadataValue.int(measured.waiting),
        "band": dg.MetadataValue.text(f"({section.min_pass_rate:g}, {section.max_pass_rate:g})"),
    }
    if stopped:
        cost["budget_stopped"] = dg.MetadataValue.text(stopped)
    for engine, before in built:  # the student's tokens, seconds and cost (ptf run's table reads them)
        cost.update(engine_metadata(engine, before, engines.price_per_mtok("student")))
    if assembled.table.num_rows == 0 and not datasets.versions(name):
        return dg.MaterializeResult(
            metadata={
                "created": dg.MetadataValue.bool(False),
                "left_out": counts_md(assembled.skipped, "reason"),
                **cost,
            },
            check_results=audit_check_results("rl_dataset", {}, absent="not run: nothing to publish yet"),
        )
    extra: dict[str, Any] = {
        "batch_configs": settings.batch_hashes(assembled.batches),
        "decontamination": decontamination_stats(settings),
        "rl": {**section.model_dump(mode="json"), "student": _student(config)},
    }
    published_or_refused = publish_assembled(
        context, settings, engines, name=name, kind="rl", assembled=assembled, extra=extra, metadata=cost
    )
    if isinstance(published_or_refused, dg.MaterializeResult):
        return published_or_refused
    result, added, how = published_or_refused
    manifest = result.manifest
    remembered = remember_prompts(settings, added) if result.created else 0
    return dg.MaterializeResult(
        metadata={
            "version": dg.MetadataValue.text(manifest.ref),
            "created": dg.MetadataValue.bool(result.created),
            "path": dg.MetadataValue.path(result.path),
            "dagster/row_count": dg.MetadataValue.int(manifest.rows),
            "rows_added": dg.MetadataValue.int(manifest.rows_added),
            "rows_removed": dg.MetadataValue.int(manifest.rows_removed),
            "batches": dg.MetadataValue.text(", ".join(manifest.batches)),
            "semantic_index_added": dg.MetadataValue.int(remembered),
            **figures_metadata(manifest.stats),
            "publish": dg.MetadataValue.text(how),
            "left_out": counts_md(assembled.skipped, "reason"),
            **cost,
            "preview": preview_md(assembled.table),
        },
        check_results=audit_check_results("rl_dataset", manifest.checks),
    )
