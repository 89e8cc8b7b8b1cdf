"""``difficulty_scored`` and ``routed_samples``: what to keep and who decides (judging: assets/judging.py)."""

from collections import Counter

import dagster as dg
import numpy as np
import pyarrow as pa

from ptfactory.annotators.routing import route
from ptfactory.assets.budget import budget_metadata, held_back, metered, stage_guard, within_budget
from ptfactory.assets.common import (
    check_specs,
    counts_md,
    engine_metadata,
    preview_md,
    schema_check,
    unique_ids_check,
)
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import FactoryResource
from ptfactory.filters.difficulty import STAGE as DIFFICULTY
from ptfactory.filters.difficulty import score_difficulty
from ptfactory.filters.execution.remembering import Remembering
from ptfactory.filters.execution.select import open_sandbox
from ptfactory.storage.schema import conform, live_rows


def histogram_md(values: list[float], bins: list[float], label: str) -> dg.MetadataValue:
    """A small text histogram: bins, counts and bars, readable in the asset's metadata panel."""
    if not values:
        return dg.MetadataValue.md(f"no {label} values")
    counts, edges = np.histogram(values, bins=bins)
    peak = max(int(counts.max()), 1)
    lines = [f"| {label} | rows | |", "|---|---|---|"]
    for low, high, count in zip(edges[:-1], edges[1:], counts, strict=True):
        lines.append(f"| {low:g}–{high:g} | {int(count)} | {'█' * round(20 * int(count) / peak)} |")
    return dg.MetadataValue.md("\n".join(lines))


@dg.asset(
    partitions_def=batch_partitions,
    group_name="difficulty",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    pool="sandbox",
    check_specs=check_specs("difficulty_scored", ["schema_valid", "unique_ids"]),
)
def difficulty_scored(
    context: dg.AssetExecutionContext, factory: FactoryResource, execution_validated: pa.Table
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Difficulty per kind: pass rate of a student model (code in the sandbox, math by final number),
    or IFD from the student's log-probabilities against the batch's band; rows outside it are
    dropped with the reason. Also dropped: responses cut at max_tokens (``truncated``) and code
    whose own solution fails (``unsolvable`` when nothing passes, else ``execution_<status>``).
    Rows the budget stopped before their scores are dropped as ``budget_exhausted``; the band is
    then the finished rows'."""
    config = factory.config
    student = factory.engine("student")
    before = student.stats.__dict__.copy()
    guard = stage_guard(context, factory, "difficulty_scored")
    with (
        # each distinct program runs once: a replay after a budget stop reuses the first pass's runs
        Remembering(
            open_sandbox(config.sandbox.limits(), config.sandbox.workers, config.sandbox.backend)
        ) as sandbox,
        metered(guard, [(student, factory.price_per_mtok("student"))]),
    ):
        (table, stats), unfinished = within_budget(
            guard,
            [student],
            execution_validated,
            lambda rows: score_difficulty(rows, student, sandbox, config.difficulty.to_config()),
            stage=DIFFICULTY,
            domain=live_rows(execution_validated),
        )
    if unfinished.num_rows:
        table = pa.concat_tables([table, conform(unfinished)], promote_options="default")
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "methods": counts_md(stats.methods, "method"),
            "dropped_by_reason": counts_md(stats.dropped, "reason"),
            "ifd_band": dg.MetadataValue.text(
                f"[{stats.ifd_band[0]:.3g}, {stats.ifd_band[1]:.3g})" if stats.ifd_band else "no IFD rows"
            ),
            "difficulty_histogram": histogram_md(
                stats.values, [0, 0.25, 0.5, 0.75, 1.0, 1.5, 3.0], "difficulty"
            ),
            **engine_metadata(student, before, factory.price_per_mtok("student")),
            **budget_metadata(guard, unfinished),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, "difficulty_scored"),
            unique_ids_check(table, "difficulty_scored"),
        ],
    )


@dg.asset(
    partitions_def=batch_partitions,
    group_name="route",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("routed_samples", ["schema_valid", "unique_ids"]),
)
def routed_samples(
    context: dg.AssetExecutionContext,
    factory: FactoryResource,
    judged_samples: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Auto-accepted, auto-rejected, or sent to expert review (most uncertain first, within the
    batch's review budget), plus a blind audit sample of the automatic verdicts (its own budget).
    Rows over the budget wait: they compete for the next batches' budgets, read here from the
    earlier batches' stored routed_samples, and a winner is copied into this batch's output with
    its new decision (see ``annotators/routing.py``); none is dropped, none stranded.

    A run that stopped at its budget routes nothing of its batch unless ``budget.publish_partial``:
    every live row is dropped as ``budget_exhausted`` (held back) until a rerun finishes the batch."""
    batch = context.partition_key
    guard = stage_guard(context, factory, "routed_samples")
    stops = guard.ledger.stops(guard.run_id, batch)
    if stops and not guard.budget.publish_partial:
        held = held_back(judged_samples, stops)
        return dg.MaterializeResult(
            value=held,
            metadata={
                "dagster/row_count": dg.MetadataValue.int(held.num_rows),
                **budget_metadata(guard, held=len(live_rows(judged_samples))),
                "preview": preview_md(held),
            },
            check_results=[schema_check(held, "routed_samples"), unique_ids_check(held, "routed_samples")],
        )
    keys = list(context.instance.get_dynamic_partitions(batch_partitions.name))
    before = keys[: keys.index(batch)] if batch in keys else keys  # partition order: oldest first
    store = factory.asset_store()
    stored = [key for key in before if store.exists("routed_samples", key)]
    tables = [store.read("routed_samples", key) for key in stored]
    earlier = pa.concat_tables(tables, promote_options="default") if tables else None
    table, counts = route(
        judged_samples, factory.config.routing.to_config(), batch=batch, earlier=earlier, order=stored
    )
    batches = table.column("batch").to_pylist()
    kinds = Counter(
        k
        for k, t in zip(table.column("kind").to_pylist(), table.column("decisions").to_pylist(), strict=True)
        if t and t[-1]["stage"] == "route"
    )
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "routes": counts_md(counts, "route"),
            "auto_accept": dg.MetadataValue.int(counts.get("auto_accept", 0)),
            "needs_review": dg.MetadataValue.int(counts.get("needs_review", 0)),
            "waiting": dg.MetadataValue.int(counts.get("waiting", 0)),
            "auto_reject": dg.MetadataValue.int(counts.get("auto_reject", 0)),
            "audit": dg.MetadataValue.int(counts.get("audit", 0)),
            "waited_too_long": dg.MetadataValue.int(counts.get("waited_too_long", 0)),
            "from_earlier_batches": dg.MetadataValue.int(sum(1 for b in batches if b != batch)),
            "routed_kinds": counts_md(kinds, "kind"),
            "preview": preview_md(table),
        },
        check_results=[schema_check(table, "routed_samples"), unique_ids_check(table, "routed_samples")],
    )
