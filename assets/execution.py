"""``execution_validated``: code samples run against their tests in the sandbox."""

import dagster as dg
import pyarrow as pa

from ptfactory.assets.common import check_specs, counts_md, preview_md, schema_check, unique_ids_check
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import FactoryResource
from ptfactory.filters.execution.validate import validate_samples


@dg.asset(
    partitions_def=batch_partitions,
    group_name="execute",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"docker"},
    pool="sandbox",
    check_specs=check_specs("execution_validated", ["schema_valid", "unique_ids"]),
)
def execution_validated(factory: FactoryResource, deduplicated_samples: pa.Table) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Each code row's solution runs against its tests: ``scores.execution`` gets the status and the
    assertions that held (each assert counted, none stopping the run), the decision names the
    outcome (``tests_passed``, ``execution_failed``, ``execution_timeout``...). Failing rows are
    not dropped here: ``difficulty_scored`` drops them (``unsolvable`` when nothing solves the
    problem), after the student's attempts. Other rows pass through with a ``not_code`` note.
    Untrusted code runs only in the sandbox."""
    with factory.sandbox() as sandbox:  # with scale.ray set: every node's own sandbox pool
        table, stats = validate_samples(deduplicated_samples, sandbox)
        backend = sandbox.backend
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "sandbox": dg.MetadataValue.text(backend),
            "validations": dg.MetadataValue.int(stats.validations),
            "statuses": counts_md(stats.statuses, "status"),
            "not_code": dg.MetadataValue.int(stats.not_code),
            "assertions_held": dg.MetadataValue.text(f"{stats.assertions_passed}/{stats.assertions_total}"),
            "validations_per_s": dg.MetadataValue.float(round(stats.per_second, 2)),
            "p50_job_ms": dg.MetadataValue.float(round(stats.percentile(50), 1)),
            "p95_job_ms": dg.MetadataValue.float(round(stats.percentile(95), 1)),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, "execution_validated"),
            unique_ids_check(table, "execution_validated"),
        ],
    )
