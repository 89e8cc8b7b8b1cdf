"""``difficulty_scored``, ``judged_samples`` and ``routed_samples``: what to keep, how good, who decides."""

from collections import Counter

import dagster as dg
import numpy as np
import pyarrow as pa

from ptfactory.annotators.routing import route
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
from ptfactory.filters.difficulty import score_difficulty
from ptfactory.filters.execution.select import open_sandbox


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
def difficulty_scored(factory: FactoryResource, execution_validated: pa.Table) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Difficulty per kind: pass rate of a student model (code in the sandbox, math by final number),
    or IFD from the student's log-probabilities; rows outside the band are dropped with the reason."""
    config = factory.config
    student = factory.engine("student")
    before = student.stats.__dict__.copy()
    with open_sandbox(config.sandbox.limits(), config.sandbox.workers, config.sandbox.backend) as sandbox:
        table, stats = score_difficulty(execution_validated, student, sandbox, config.difficulty.to_config())
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "methods": counts_md(stats.methods, "method"),
            "dropped_by_reason": counts_md(stats.dropped, "reason"),
            "difficulty_histogram": histogram_md(
                stats.values, [0, 0.25, 0.5, 0.75, 1.0, 1.5, 3.0], "difficulty"
            ),
            **engine_metadata(student, before, factory.price_per_mtok("student")),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, "difficulty_scored"),
            unique_ids_check(table, "difficulty_scored"),
        ],
    )


def _judge_vs_execution(table: pa.Table, llm_judges: set[str]) -> tuple[float | None, int]:
    """How often the LLM judges' (by name) verdicts agree with the sandbox on code rows (pass = accept)."""
    agree = total = 0
    for scores, kind in zip(
        table.column("scores").to_pylist(), table.column("kind").to_pylist(), strict=True
    ):
        execution = (scores or {}).get("execution")
        if kind != "code" or not execution:
            continue
        for vote in (scores or {}).get("judges") or []:
            if vote["judge"] not in llm_judges or not vote["parsed"] or vote["score"] is None:
                continue
            total += 1
            agree += (vote["verdict"] == "accept") == (execution["status"] == "passed")
    return (agree / total if total else None), total


@dg.asset(
    partitions_def=batch_partitions,
    group_name="judge",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("judged_samples", ["schema_valid", "unique_ids"]),
)
def judged_samples(factory: FactoryResource, difficulty_scored: pa.Table) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Every kept row scored by the judge panel (factory.yaml ``judges``): each vote, the mean,
    median and spread; replies that do not parse are kept raw and left out of the aggregate."""
    specs = factory.config.judges  # which judges exist, their types and families: factory.yaml only
    panel = factory.panel()
    table, alpha = panel.judge_table(difficulty_scored)
    means = [m for m in (s["judge_mean"] for s in table.column("scores").to_pylist() if s) if m is not None]
    agreement, compared = _judge_vs_execution(table, {j.name for j in specs if j.type == "llm"})
    families = {j.name: j.family or "" for j in specs}
    per_judge = [
        "| judge | family | model | votes | unparsed | parse failure rate | tokens | est. cost $ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for judge in panel.judges:
        st = judge.stats
        per_judge.append(
            f"| {judge.name} | {families.get(judge.name, '')} | {judge.model} | {st.votes} | {st.unparsed} | "
            f"{st.parse_failure_rate:.2%} | {st.prompt_tokens + st.completion_tokens} | {st.cost_usd:.6f} |"
        )
    total_votes = sum(j.stats.votes for j in panel.judges)
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "krippendorff_alpha": dg.MetadataValue.float(round(alpha, 4)) if alpha is not None else None,
            "judges": dg.MetadataValue.md("\n".join(per_judge)),
            "judge_families": dg.MetadataValue.int(len(set(families.values()))),
            "parse_failure_rate": dg.MetadataValue.float(
                round(sum(j.stats.unparsed for j in panel.judges) / total_votes, 4) if total_votes else 0.0
            ),
            "score_histogram": histogram_md(means, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "judge mean"),
            "judge_vs_execution_agreement": (
                dg.MetadataValue.float(round(agreement, 4)) if agreement is not None else None
            ),
            "judge_vs_execution_compared": dg.MetadataValue.int(compared),
            "estimated_cost_usd": dg.MetadataValue.float(
                round(sum(j.stats.cost_usd for j in panel.judges), 6)
            ),
            # the panel's totals, under the keys the run summary and the version stats add up
            "prompt_tokens": dg.MetadataValue.int(sum(j.stats.prompt_tokens for j in panel.judges)),
            "completion_tokens": dg.MetadataValue.int(sum(j.stats.completion_tokens for j in panel.judges)),
            "preview": preview_md(table),
        },
        check_results=[schema_check(table, "judged_samples"), unique_ids_check(table, "judged_samples")],
    )


@dg.asset(
    partitions_def=batch_partitions,
    group_name="route",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("routed_samples", ["schema_valid", "unique_ids"]),
)
def routed_samples(factory: FactoryResource, judged_samples: pa.Table) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Auto-accepted, auto-rejected, or sent to expert review (highest disagreement first, within
    the batch's review budget; the rest wait for the next budget and are never dropped)."""
    table, counts = route(judged_samples, factory.config.routing.to_config())
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
            "routed_kinds": counts_md(kinds, "kind"),
            "preview": preview_md(table),
        },
        check_results=[schema_check(table, "routed_samples"), unique_ids_check(table, "routed_samples")],
    )
