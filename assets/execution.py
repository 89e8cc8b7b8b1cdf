"""``execution_validated``: code samples run against their tests in the sandbox.

Its ``infra_errors`` check (blocking) fails when more than ``execution.max_infra_error_share`` of
the batch's sandbox runs ended in an infrastructure fault (a known-good control program failed the
same way: filters/execution/control.py); the batch's live rows are then dropped as
``sandbox_unreliable`` and nothing downstream of it runs, so nothing of it is published.
"""

import dagster as dg
import pyarrow as pa

from ptfactory.assets.common import check_specs, counts_md, preview_md, schema_check, unique_ids_check
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.pools import SANDBOX_POOL
from ptfactory.assets.resources.sandbox import SandboxResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.filters.execution.validate import ValidationStats, validate_samples


def infra_check(stats: ValidationStats) -> dg.AssetCheckResult:
    """The batch's infrastructure health (blocking): past the allowed share, nothing goes on."""
    gate = stats.gate
    return dg.AssetCheckResult(
        check_name="execution_validated_infra_errors",
        passed=gate.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=gate.describe(),
        metadata={
            "infra_errors": dg.MetadataValue.int(gate.infra),
            "runs": dg.MetadataValue.int(gate.runs),
            "infra_error_share": dg.MetadataValue.float(round(gate.share, 4)),
            "max_infra_error_share": dg.MetadataValue.float(gate.max_share),
        },
    )


@dg.asset(
    partitions_def=batch_partitions,
    group_name="execute",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"docker"},
    pool=SANDBOX_POOL,
    check_specs=[
        *check_specs("execution_validated", ["schema_valid", "unique_ids"]),
        *check_specs("execution_validated", ["infra_errors"], blocking=True),
    ],
)
def execution_validated(
    settings: SettingsResource, sandbox: SandboxResource, decontaminated_samples: pa.Table
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Each code row's solution runs against its tests: ``scores.execution`` gets the status and the
    assertions that held (each assert counted, none stopping the run), the decision names the
    outcome (``tests_passed``, ``execution_failed``, ``execution_timeout``...). Failing rows are
    not dropped here: ``difficulty_scored`` drops them (``unsolvable`` when nothing solves the
    problem), after the student's attempts. Other rows pass through with a ``not_code`` note.
    Untrusted code runs only in the sandbox. Infrastructure faults are retried
    (``execution.infra_retries``), then abstain; past ``execution.max_infra_error_share`` the
    batch stops here (the blocking ``infra_errors`` check)."""
    config = settings.config.execution
    with sandbox.pool() as pool:  # with scale.ray set: every node's own sandbox pool
        table, stats = validate_samples(decontaminated_samples, pool, config=config)
        backend = pool.backend
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
            "infra_errors": dg.MetadataValue.int(stats.infra_errors),
            "solution_faults": dg.MetadataValue.int(stats.solution_faults),
            "infra_retries": dg.MetadataValue.int(stats.retries),
            "preview": preview_md(table),
        },
        check_results=[
            schema_check(table, "execution_validated"),
            unique_ids_check(table, "execution_validated"),
            infra_check(stats),
        ],
    )
