"""``difficulty_scored`` and ``routed_samples``: what to keep and who decides (judging: assets/judging.py;
the review queue routing appends to: annotators/review_queue.py)."""

from collections import Counter

import dagster as dg
import numpy as np
import pyarrow as pa

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
from ptfactory.assets.pools import GPU_POOL
from ptfactory.assets.resources.engines import EnginesResource
from ptfactory.assets.resources.sandbox import SandboxResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.filters.difficulty import STAGE as DIFFICULTY
from ptfactory.filters.difficulty import score_difficulty
from ptfactory.filters.execution.remembering import Remembering
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
    pool=GPU_POOL,  # the student engine; its code attempts run in the sandbox too (assets/pools.py)
    check_specs=check_specs("difficulty_scored", ["schema_valid", "unique_ids"]),
)
def difficulty_scored(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    sandbox: SandboxResource,
    execution_validated: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Difficulty per kind: pass rate of a student model (code in the sandbox, math by final number),
    or IFD from the student's log-probabilities against the batch's band; rows outside it are
    dropped with the reason. Also dropped: responses cut at max_tokens (``truncated``) and code
    whose own solution fails (``unsolvable`` when nothing passes, else ``execution_<status>``).
    Rows the budget stopped before their scores are dropped as ``budget_exhausted``; the band is
    then the finished rows'."""
    student, price = engines.engine("student"), engines.price_per_mtok("student")
    before = student.stats.__dict__.copy()
    guard = stage_guard(context, settings, "difficulty_scored")
    with (
        # each distinct program runs once: a replay after a budget stop reuses the first pass's runs
        Remembering(sandbox.local()) as pool,
        metered(guard, [(student, price)]),
    ):
        (table, stats), unfinished = within_budget(
            guard,
            [student],
            execution_validated,
            lambda rows: score_difficulty(
                rows,
                student,
                pool,
                settings.config.difficulty,
                retries=settings.config.execution.infra_retries,  # then the attempt abstains
            ),
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
            **engine_metadata(student, before, price),
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
    kinds={"parquet", "sqlite"},
    check_specs=check_specs("routed_samples", ["schema_valid", "unique_ids"]),
)
def routed_samples(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    judged_samples: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Auto-accepted, auto-rejected, or sent to expert review (most uncertain first, within the
    batch's review budget), plus a blind audit sample of the automatic verdicts (its own budget).
    Rows that need a human join the review queue (``review_queue``); rows over the budget wait
    there and compete for the next batches' budgets. This batch's budget may give its slots to
    rows other batches left waiting: the queue records their new decision, atomically with the
    claim (``annotators/review_queue.py``), and this partition holds this batch's rows only.

    A run that stopped at its budget routes nothing of its batch unless ``budget.publish_partial``:
    every live row is dropped as ``budget_exhausted`` (held back) until a rerun finishes the batch."""
    batch = context.partition_key
    guard = stage_guard(context, settings, "routed_samples")
    stops = guard.ledger.stops(guard.run_id, batch)
    queue = settings.review_queue()
    if stops and not guard.budget.publish_partial:
        held = queue.admit(batch, held_back(judged_samples, stops), settings.config.routing).table
        return dg.MaterializeResult(
            value=held,
            metadata={
                "dagster/row_count": dg.MetadataValue.int(held.num_rows),
                **budget_metadata(guard, held=len(live_rows(judged_samples))),
                "preview": preview_md(held),
            },
            check_results=[schema_check(held, "routed_samples"), unique_ids_check(held, "routed_samples")],
        )
    admission = queue.admit(batch, judged_samples, settings.config.routing)
    table, counts = admission.table, admission.counts
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
            # other batches' waiting rows this batch's budget gave a review slot (in the queue)
            "from_earlier_batches": dg.MetadataValue.int(admission.promoted),
            "routed_kinds": counts_md(kinds, "kind"),
            "preview": preview_md(table),
        },
        check_results=[schema_check(table, "routed_samples"), unique_ids_check(table, "routed_samples")],
    )
