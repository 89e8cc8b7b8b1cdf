"""``seed_tasks``: the batch's seed files, validated, as sample records."""

from collections import Counter

import dagster as dg
import pyarrow as pa

from ptfactory.assets.common import check_specs, counts_md, preview_md, schema_check, unique_ids_check
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import FactoryResource
from ptfactory.generators.seeds import read_seeds, seeds_to_table


@dg.asset(
    partitions_def=batch_partitions,
    group_name="seed",
    io_manager_key="samples_io",
    dagster_type=dg.Any,  # the value is a pa.Table; MaterializeResult alone would mean "no value"
    kinds={"parquet"},
    check_specs=check_specs("seed_tasks", ["schema_valid", "unique_ids"]),
)
def seed_tasks(context: dg.AssetExecutionContext, factory: FactoryResource) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Seed tasks of one batch: instruction-only, instruction + reference answer, or code problems with tests.

    Read from the seed files staged for the batch (``PTF_HOME/seeds/<batch>/``); a bad file
    fails the run with the file, line and field.
    """
    batch = context.partition_key
    seeds = factory.seeds()
    if not seeds.exists(batch):
        raise FileNotFoundError(
            f"batch {batch!r} has no staged seed files; add batches with `ptf run --seeds PATH`"
        )
    tasks = read_seeds(seeds.local_dir(batch), factory.config.seeds.max_field_chars)
    table: pa.Table = seeds_to_table(tasks, batch)
    kinds = Counter(table.column("kind").to_pylist())
    with_reference = sum(1 for t in tasks if t.response is not None)
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "with_reference": dg.MetadataValue.int(with_reference),
            "instruction_only": dg.MetadataValue.int(table.num_rows - with_reference),
            "kinds": counts_md(kinds, "kind"),
            "preview": preview_md(table),
        },
        check_results=[schema_check(table, "seed_tasks"), unique_ids_check(table, "seed_tasks")],
    )
