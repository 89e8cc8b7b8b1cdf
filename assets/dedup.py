"""``deduplicated_samples``: MinHash near duplicates, then paraphrased tasks (semantic dedup), removed
within the batch and against published data."""

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.assets.common import (
    check_specs,
    counts_md,
    md_cell,
    preview_md,
    schema_check,
    unique_ids_check,
)
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources.scale import ScaleResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.filters.dedup.samples import dedup_samples
from ptfactory.filters.dedup.semantic import semantic_dedup_samples
from ptfactory.storage.schema import conform, empty_table

_MERGES_SHOWN = 10


def _merges_md(pairs: list[dict[str, object]]) -> dg.MetadataValue:
    """The batch's semantic merges (the dropped instruction, the one kept, their cosine), a few."""
    lines = ["| dropped | kept | similarity |", "|---|---|---|"]
    for pair in pairs[:_MERGES_SHOWN]:
        cells = [md_cell(pair["dropped"]), md_cell(pair["kept"]), str(pair["similarity"])]
        lines.append("| " + " | ".join(cells) + " |")
    if len(pairs) > _MERGES_SHOWN:
        lines.append(f"\n{len(pairs) - _MERGES_SHOWN} more")
    return dg.MetadataValue.md("\n".join(lines))


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
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    scale: ScaleResource,
    candidate_responses: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Candidate responses and the sft rows made of the batch's agent trajectories (their text holds
    the tool calls; episodes and their pairs pass through) with near duplicates dropped (reason ``near_duplicate``
    and the id kept in their place), checked against every published sample too
    (``near_duplicate_published``). With ``scale.ray`` set, hashing and the band shuffle run on
    the Ray cluster (same output). Then semantic dedup: instructions asking for one task in other
    words are merged (``semantic_duplicate``, ``{"of": <kept sample id>, "similarity": s}`` in the
    decision's detail; the kept one ``semantic_representative``), within the batch and against
    the instructions of published versions (``semantic_dedup`` in factory.yaml)."""
    dedup = settings.config.dedup
    index = settings.dedup_index() if dedup.against_published else None
    # agent_trajectories is an ordering dependency, read where it ran: a graph without the agent
    # stages (or a batch they have not run for) dedups its responses alone
    agents = settings.asset_store()
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
    table, stats = dedup_samples(rows, dedup, index, scale.dedup_engine())
    # then the instructions that ask for one task in other words: within the batch, and against
    # the instructions of published versions (filters/dedup/semantic.py)
    semantic = settings.config.semantic_dedup
    table, paraphrases = semantic_dedup_samples(table, semantic, published=settings.published_prompts())
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
            "semantic_tasks": dg.MetadataValue.int(paraphrases.tasks),
            "semantic_merged_in_batch": dg.MetadataValue.int(paraphrases.merged),
            "semantic_merged_with_published": dg.MetadataValue.int(paraphrases.published_matches),
            "semantic_dropped_rows": dg.MetadataValue.int(paraphrases.dropped_rows),
            "semantic_merges": _merges_md(paraphrases.pairs),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, "deduplicated_samples"),
            unique_ids_check(table, "deduplicated_samples"),
        ],
    )
