"""``deduplicated_samples``: MinHash near-duplicate removal within the batch and against published data."""

import dagster as dg
import pyarrow as pa

from ptfactory.assets.common import check_specs, counts_md, preview_md, schema_check, unique_ids_check
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import FactoryResource
from ptfactory.filters.dedup.samples import dedup_samples


@dg.asset(
    partitions_def=batch_partitions,
    group_name="dedup",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("deduplicated_samples", ["schema_valid", "unique_ids"]),
)
def deduplicated_samples(factory: FactoryResource, candidate_responses: pa.Table) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Candidate responses with near duplicates dropped (reason ``near_duplicate`` and the id kept
    in their place), checked against every published sample too (``near_duplicate_published``).
    With ``scale.ray`` set, hashing and the band shuffle run on the Ray cluster (same output)."""
    settings = factory.config.dedup
    index = factory.dedup_index() if settings.against_published else None
    table, stats = dedup_samples(candidate_responses, settings.to_config(), index, factory.dedup_engine())
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "rows_in": dg.MetadataValue.int(stats.rows_in),
            "rows_out": dg.MetadataValue.int(stats.rows_out),
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
