"""``decontaminated_samples``: rows that quote an evaluation-set item are dropped, naming the item."""

from collections import Counter

import dagster as dg
import pyarrow as pa

from ptfactory.assets.common import check_specs, preview_md, schema_check, unique_ids_check
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.filters.decontamination import NgramIndex, decontaminate_samples

ASSET = "decontaminated_samples"


def _benchmarks_md(index: NgramIndex, hits: Counter[str]) -> dg.MetadataValue:
    """Per benchmark: its items in the index, this batch's rows that collided with one, its licence."""
    lines = ["| benchmark | items | rows hit | licence |", "|---|---|---|---|"]
    for bench in index.benchmarks:
        name = bench["name"]
        lines.append(f"| {name} | {bench['items']} | {hits.get(name, 0)} | {bench.get('licence', '')} |")
    return dg.MetadataValue.md("\n".join(lines))


def _loaded_check(index: NgramIndex | None) -> dg.AssetCheckResult:
    """Every configured benchmark loaded items: an index missing one checks nothing against it
    (blocking: nothing downstream runs on rows not checked against what factory.yaml names)."""
    empty = index.empty_benchmarks() if index is not None else []
    if index is None:
        description = "decontamination.enabled is false: nothing checked"
    elif empty:
        description = (
            f"benchmark(s) {', '.join(empty)} loaded 0 items: fix their path and fields under "
            "decontamination.benchmarks in factory.yaml"
        )
    else:
        description = "every configured benchmark loaded items"
    return dg.AssetCheckResult(
        check_name=f"{ASSET}_benchmarks_loaded",
        passed=not empty,
        description=description,
        metadata={"empty": ", ".join(empty) or "none", **(index.counts if index is not None else {})},
    )


@dg.asset(
    partitions_def=batch_partitions,
    group_name="decontaminate",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=[
        *check_specs(ASSET, ["schema_valid", "unique_ids"]),
        *check_specs(ASSET, ["benchmarks_loaded"], blocking=True),
    ],
)
def decontaminated_samples(
    settings: SettingsResource, deduplicated_samples: pa.Table
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Every live row's text (messages, chosen/rejected, tests, agent steps) checked against the
    benchmark n-gram index (HumanEval, GSM8K test, AIME 2025, GPQA diamond, WritingBench, AgentBench
    OS and your own files: ``decontamination`` in factory.yaml). A row sharing an n-gram with an item
    (or holding a whole short item) is dropped with reason ``contaminated``; the decision's detail
    names the benchmark, the item and the shared n-gram, so ``ptf lineage ID`` names the item. The
    index is built once and cached by its content key: a batch costs its own rows."""
    config = settings.config.decontamination
    if not config.enabled:
        return dg.MaterializeResult(
            value=deduplicated_samples,
            metadata={
                "dagster/row_count": dg.MetadataValue.int(deduplicated_samples.num_rows),
                "enabled": dg.MetadataValue.bool(False),
            },
            check_results=[
                schema_check(deduplicated_samples, ASSET),
                unique_ids_check(deduplicated_samples, ASSET),
                _loaded_check(None),
            ],
        )
    index = settings.decontamination_index()
    table, stats = decontaminate_samples(deduplicated_samples, index)
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "contaminated": dg.MetadataValue.int(stats.contaminated),
            "checked": dg.MetadataValue.int(stats.checked),
            "rows_per_s": dg.MetadataValue.float(round(stats.rows_per_s, 1)),
            "index_hash": dg.MetadataValue.text(index.content_hash),
            "ngram": dg.MetadataValue.int(index.n),
            "benchmarks": _benchmarks_md(index, stats.by_benchmark),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, ASSET),
            unique_ids_check(table, ASSET),
            _loaded_check(index),
        ],
    )
