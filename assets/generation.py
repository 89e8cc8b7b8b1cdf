"""``candidate_instructions`` and ``candidate_responses``: the generation stage."""

from collections import Counter

import dagster as dg
import pyarrow as pa

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
from ptfactory.generators.instructions import generate_instructions
from ptfactory.generators.responses import generate_responses


@dg.asset(
    partitions_def=batch_partitions,
    group_name="generate",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("candidate_instructions", ["schema_valid", "unique_ids"]),
)
def candidate_instructions(
    context: dg.AssetExecutionContext, factory: FactoryResource, seed_tasks: pa.Table
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Seed instructions plus new ones: self-instruct (novelty-filtered), evol-instruct, code problems.

    Replies that do not parse are kept as dropped rows with their raw text and a reason.
    """
    engine = factory.engine("generator")
    before = engine.stats.__dict__.copy()
    table, stats = generate_instructions(seed_tasks, engine, factory.config.generation, context.partition_key)
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "kept_by_method": counts_md(stats.kept, "method"),
            "dropped_by_reason": counts_md(stats.dropped, "reason"),
            "parse_failures": dg.MetadataValue.int(
                sum(v for k, v in stats.dropped.items() if k.startswith("unparse"))
            ),
            "exact_duplicates": dg.MetadataValue.int(stats.exact_duplicates),
            **engine_metadata(engine, before, factory.price_per_mtok("generator")),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, "candidate_instructions"),
            unique_ids_check(table, "candidate_instructions"),
        ],
    )


@dg.asset(
    partitions_def=batch_partitions,
    group_name="generate",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("candidate_responses", ["schema_valid", "unique_ids"]),
)
def candidate_responses(
    context: dg.AssetExecutionContext,
    factory: FactoryResource,
    candidate_instructions: pa.Table,
    seed_tasks: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """``n`` sampled responses per kept instruction, plus the seeds' reference answers."""
    engine = factory.engine("generator")
    before = engine.stats.__dict__.copy()
    table, stats = generate_responses(
        candidate_instructions, seed_tasks, engine, factory.config.generation.responses
    )
    kinds = Counter(table.column("kind").to_pylist())
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "instructions": dg.MetadataValue.int(stats.instructions),
            "kept_by_method": counts_md(stats.kept, "method"),
            "dropped_by_reason": counts_md(stats.dropped, "reason"),
            "kinds": counts_md(kinds, "kind"),
            **engine_metadata(engine, before, factory.price_per_mtok("generator")),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, "candidate_responses"),
            unique_ids_check(table, "candidate_responses"),
        ],
    )
