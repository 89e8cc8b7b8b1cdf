"""``deduplicated_samples``: MinHash near-duplicate removal within the batch and against published data."""

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.assets.common import check_specs, counts_md, preview_md, schema_check, unique_ids_check
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import FactoryResource
from ptfactory.filters.dedup.samples import dedup_samples
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import conform, empty_table


@dg.asset(
    partitions_def=batch_partitions,
    group_name="dedup",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("deduplicated_samples", ["schema_valid", "unique_ids"]),
    deps=["agent_trajectories"],
)
def deduplicated_samples(
    context: dg.AssetExecutionContext, factory: FactoryResource, candidate_responses: pa.Table
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Candidate responses and the sft rows made of the batch's agent trajectories (their text holds
    the tool calls; episodes and their pairs pass through) with near duplicates dropped (reason ``near_duplicate``
    and the id kept in their place), checked against every published sample too
    (``near_duplicate_published``). With ``scale.ray`` set, hashing and the band shuffle run on
    the Ray cluster (same output)."""
    settings = factory.config.dedup
    index = factory.dedup_index() if settings.against_published else None
    # agent_trajectories is an ordering dependency, read where it ran: a graph without the agent
    # stages (or a batch they have not run for) dedups its responses alone
    agents = AssetStore(factory.resolved_home)
    batch = context.partition_key
    parts, episodes = [conform(candidate_responses)], empty_table()
    if agents.exists("agent_trajectories", batch):
        agent = conform(agents.read("agent_trajectories", batch))
        is_episode = pc.is_in(agent.column("kind"), value_set=pa.array(["agent", "preference"]))
        # the sft rows made of solved trajectories are deduplicated (their text is the episode, calls
        # included); the episodes are their records and pass through (else a solved episode and its
        # sft row would be each other's duplicate), and so do the pairs (dedup reads a pair's
        # prompt only: a task's pairs share it; elsewhere pairs are made after dedup)
        parts.append(agent.filter(pc.invert(is_episode)))
        episodes = agent.filter(is_episode)
    rows = pa.concat_tables(parts)
    table, stats = dedup_samples(rows, settings.to_config(), index, factory.dedup_engine())
    table = pa.concat_tables([table, episodes])
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "rows_in": dg.MetadataValue.int(stats.rows_in),
            "rows_out": dg.MetadataValue.int(stats.rows_out),
            "agent_episodes": dg.MetadataValue.int(episodes.num_rows),
            "clusters": dg.MetadataValue.int(stats.clusters),
            "largest_cluster": dg.MetadataValue.int(stats.largest_cluster),
            "dropped_by_reason": counts_md(stats.dropped, "reason"),
            "docs_per_s": dg.MetadataValue.float(round(stats.docs_per_s, 1)),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, "deduplicated_samples"),
            unique_ids_check(table, "deduplicated_samples"),
        ],
    )
