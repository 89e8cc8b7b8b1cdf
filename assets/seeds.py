"""``seed_tasks``: the batch's seed files, validated, as sample records."""

from collections import Counter
from pathlib import Path

import dagster as dg
import pyarrow as pa

from ptfactory.assets.common import check_specs, counts_md, preview_md, schema_check, unique_ids_check
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.filters.privacy import clean_samples, read_sidecar, record_redactions
from ptfactory.generators.procedural import procedural_seed_tasks
from ptfactory.generators.seeds import SeedTask, read_seeds, seeds_to_table


def _staged_counts(folder: Path, tasks: list[SeedTask]) -> list[dict[str, int]]:
    """Each task's redaction counts from the staged batch's sidecar: the k-th row of a file is its
    k-th task (read_seeds keeps file and row order); nothing recorded, nothing redacted."""
    recorded = read_sidecar(folder)
    seen: Counter[str] = Counter()
    counts = []
    for task in tasks:
        # "<path>:<line>" for JSONL, "<path>: row <n>" for Parquet: the file is before the last colon
        name = Path(task.source.rsplit(":", 1)[0]).name
        rows = recorded.get(name) or []
        counts.append(rows[seen[name]] if seen[name] < len(rows) else {})
        seen[name] += 1
    return counts


@dg.asset(
    partitions_def=batch_partitions,
    group_name="seed",
    io_manager_key="samples_io",
    dagster_type=dg.Any,  # the value is a pa.Table; MaterializeResult alone would mean "no value"
    kinds={"parquet"},
    check_specs=check_specs("seed_tasks", ["schema_valid", "unique_ids"]),
)
def seed_tasks(context: dg.AssetExecutionContext, settings: SettingsResource) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Seed tasks of one batch: instruction-only, instruction + reference answer, or code problems with tests.

    Read from the seed files staged for the batch (``PTF_HOME/seeds/<batch>/``); a bad file
    fails the run with the file, line and field. factory.yaml's ``seeds.procedural`` adds
    reasoning-gym tasks (each with its family's scorer) to them. The staged files were redacted when staged
    (personal data and secrets replaced by typed placeholders); each redacted row carries a
    ``privacy`` decision with the types and counts (never a value).
    """
    batch = context.partition_key
    seeds = settings.seeds()
    if not seeds.exists(batch):
        raise FileNotFoundError(
            f"batch {batch!r} has no staged seed files; add batches with `ptf run --seeds PATH`"
        )
    folder = seeds.local_dir(batch)
    tasks = read_seeds(folder, settings.config.seeds.max_field_chars)
    # factory.yaml's seeds.procedural: reasoning-gym tasks drawn with a fixed seed, so a rerun of the
    # batch draws the same tasks (and the same ids)
    procedural = procedural_seed_tasks(
        settings.config.seeds.procedural, settings.config.seeds.max_field_chars
    )
    tasks = [*tasks, *procedural]
    table: pa.Table = seeds_to_table(tasks, batch)
    # what was redacted before staging (filters/privacy/seedfiles.py), as each row's decision; then
    # a second pass over the rows, for a batch staged before seeds were redacted (or by hand)
    privacy = settings.config.privacy
    table, staged = record_redactions(table, _staged_counts(folder, tasks), privacy)
    table, cleaned = clean_samples(table, privacy)
    found = staged.found + cleaned.found
    kinds = Counter(table.column("kind").to_pylist())
    with_reference = sum(1 for t in tasks if t.response is not None)
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "with_reference": dg.MetadataValue.int(with_reference),
            "instruction_only": dg.MetadataValue.int(table.num_rows - with_reference),
            "procedural": dg.MetadataValue.int(len(procedural)),
            "kinds": counts_md(kinds, "kind"),
            "rows_redacted": dg.MetadataValue.int(staged.rows_with_findings + cleaned.rows_with_findings),
            "redactions": counts_md(found, "type"),
            "preview": preview_md(table),
        },
        check_results=[schema_check(table, "seed_tasks"), unique_ids_check(table, "seed_tasks")],
    )
