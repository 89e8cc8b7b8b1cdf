"""``candidate_instructions`` and ``candidate_responses``: the generation stage."""

from collections import Counter
from collections.abc import Callable

import dagster as dg
import pyarrow as pa

from ptfactory.assets.budget import budget_metadata, largest_within, metered, stage_guard, within_budget
from ptfactory.assets.common import (
    check_specs,
    counts_md,
    engine_metadata,
    preview_md,
    privacy_metadata,
    schema_check,
    unique_ids_check,
)
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.pools import GPU_POOL
from ptfactory.assets.resources.engines import EnginesResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.engines.base import Engine
from ptfactory.engines.budget import BudgetExhausted, BudgetGuard
from ptfactory.filters.privacy import clean_samples
from ptfactory.generators.config import GenerationConfig
from ptfactory.generators.instructions import InstructionStats, generate_instructions
from ptfactory.generators.responses import STAGE as RESPOND
from ptfactory.generators.responses import generate_responses
from ptfactory.storage.schema import conform, live_rows

_COUNTS = ("self_instruct", "evol_instruct", "code")


def instructions_within_budget(
    guard: BudgetGuard, engine: Engine, seeds: pa.Table, config: GenerationConfig, batch: str
) -> tuple[tuple[pa.Table, InstructionStats], dict[str, int]]:
    """After the budget stopped instruction generation: the most of each method's count (in order)
    that finishes from the cache alone. A smaller count asks a prefix of the same requests."""
    done = dict.fromkeys(_COUNTS, 0)

    def attempt(key: str) -> Callable[[int], tuple[pa.Table, InstructionStats]]:
        def run(k: int) -> tuple[pa.Table, InstructionStats]:
            counts = {**done, key: k}
            sections = {m: getattr(config, m).model_copy(update={"count": counts[m]}) for m in _COUNTS}
            return generate_instructions(seeds, engine, config.model_copy(update=sections), batch)

        return run

    results = []
    for key in _COUNTS:
        done[key], result = largest_within(
            guard, [engine], attempt(key), getattr(config, key).count, n_fails=False
        )
        results.append(result)
    return results[-1], done


@dg.asset(
    partitions_def=batch_partitions,
    group_name="generate",
    pool=GPU_POOL,
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("candidate_instructions", ["schema_valid", "unique_ids"]),
)
def candidate_instructions(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    seed_tasks: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Seed instructions plus new ones: self-instruct (novelty-filtered), evol-instruct, code problems.

    Replies that do not parse are kept as dropped rows with their raw text and a reason. Personal
    data and secrets in generated text are redacted before the rows are stored (``privacy``).
    """
    engine, price = engines.engine("generator"), engines.price_per_mtok("generator")
    before = engine.stats.__dict__.copy()
    generation, batch = settings.config.generation, context.partition_key
    guard = stage_guard(context, settings, "candidate_instructions")
    with metered(guard, [(engine, price)]):
        try:
            (table, stats), done = generate_instructions(seed_tasks, engine, generation, batch), None
        except BudgetExhausted:
            (table, stats), done = instructions_within_budget(guard, engine, seed_tasks, generation, batch)
    unsent = sum(getattr(generation, m).count - done[m] for m in _COUNTS) if done else 0
    # generated text is redacted before it is stored (the prompts came from redacted seeds)
    table, privacy = clean_samples(table, settings.config.privacy)
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            **privacy_metadata(privacy),
            "kept_by_method": counts_md(stats.kept, "method"),
            "dropped_by_reason": counts_md(stats.dropped, "reason"),
            "parse_failures": dg.MetadataValue.int(
                sum(v for k, v in stats.dropped.items() if k.startswith("unparse"))
            ),
            "exact_duplicates": dg.MetadataValue.int(stats.exact_duplicates),
            **engine_metadata(engine, before, price),
            **budget_metadata(guard),
            # new instructions the budget stopped before they were asked for (no rows: nothing to carry)
            "budget_unasked_instructions": dg.MetadataValue.int(unsent),
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
    pool=GPU_POOL,
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("candidate_responses", ["schema_valid", "unique_ids"]),
)
def candidate_responses(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    candidate_instructions: pa.Table,
    seed_tasks: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """``n`` sampled responses per kept instruction, plus the seeds' reference answers; personal
    data and secrets in them are redacted (a ``privacy`` decision with types and counts)."""
    engine, price = engines.engine("generator"), engines.price_per_mtok("generator")
    before = engine.stats.__dict__.copy()
    guard = stage_guard(context, settings, "candidate_responses")
    with metered(guard, [(engine, price)]):
        (table, stats), unfinished = within_budget(
            guard,
            [engine],
            candidate_instructions,
            lambda rows: generate_responses(rows, seed_tasks, engine, settings.config.generation.responses),
            stage=RESPOND,
            domain=live_rows(candidate_instructions),
        )
    if unfinished.num_rows:  # instructions the budget stopped before their answers: kept, marked
        table = pa.concat_tables([table, conform(unfinished)], promote_options="default")
    # responses (and references) redacted before they are stored or go on to dedup
    table, privacy = clean_samples(table, settings.config.privacy)
    kinds = Counter(table.column("kind").to_pylist())
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            **privacy_metadata(privacy),
            "instructions": dg.MetadataValue.int(stats.instructions),
            "kept_by_method": counts_md(stats.kept, "method"),
            "dropped_by_reason": counts_md(stats.dropped, "reason"),
            "kinds": counts_md(kinds, "kind"),
            **engine_metadata(engine, before, price),
            **budget_metadata(guard, unfinished),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, "candidate_responses"),
            unique_ids_check(table, "candidate_responses"),
        ],
    )
