"""``sft_dataset``: publishes a new immutable version from every batch so far."""

import dagster as dg
import pyarrow as pa

from assets.common import check_specs, counts_md, preview_md, schema_check, unique_ids_check
from filters.dedup.core import compute_signatures
from pipelines.resources import FactoryResource
from storage.assemble import assemble_preference, assemble_sft
from storage.schema import row_texts
from storage.versions import DatasetStore


def _verified_check(datasets: DatasetStore, ref: str, asset: str) -> dg.AssetCheckResult:
    try:
        datasets.verify(ref)
    except Exception as exc:
        return dg.AssetCheckResult(
            check_name=f"{asset}_shards_verified", passed=False, metadata={"error": str(exc)}
        )
    return dg.AssetCheckResult(check_name=f"{asset}_shards_verified", passed=True)


def _index_published(factory: FactoryResource, table: pa.Table, name: str, version: int) -> int:
    """Later batches are deduplicated against what this version published."""
    settings = factory.config.dedup
    hashed = compute_signatures(row_texts(table), settings.to_config())
    return factory.dedup_index().add(
        table.column("sample_id").to_pylist(),
        hashed.signatures,
        name,
        version,
        table.column("batch").to_pylist(),
    )


def _publish(
    context: dg.AssetExecutionContext, factory: FactoryResource, curated: pa.Table, kind: str
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    config = factory.config
    asset = f"{kind}_dataset"
    assembled = assemble_sft(curated) if kind == "sft" else assemble_preference(curated)
    datasets = factory.datasets()
    name = config.datasets.sft if kind == "sft" else config.datasets.preference
    if assembled.table.num_rows == 0 and not datasets.versions(name):
        # nothing to publish yet (no pairs before experts label): no empty v1
        return dg.MaterializeResult(
            metadata={
                "created": dg.MetadataValue.bool(False),
                "left_out": counts_md(assembled.skipped, "reason"),
            },
            check_results=[
                dg.AssetCheckResult(check_name=f"{asset}_{check}", passed=True, metadata={"rows": 0})
                for check in ("schema_valid", "unique_ids", "shards_verified")
            ],
        )
    result = datasets.publish(
        name,
        assembled.table,
        kind=kind,
        config_hash=config.config_hash(),
        shard_rows=config.storage.shard_rows,
        dagster_run_id=context.run.run_id,
        batches=assembled.batches,
    )
    manifest = result.manifest
    published = datasets.read(manifest.ref) if result.created else assembled.table
    indexed = (
        _index_published(factory, published, manifest.name, manifest.version)
        if result.created and kind == "sft"
        else 0
    )
    return dg.MaterializeResult(
        metadata={
            "version": dg.MetadataValue.text(manifest.ref),
            "created": dg.MetadataValue.bool(result.created),
            "path": dg.MetadataValue.path(result.path),
            "dagster/row_count": dg.MetadataValue.int(manifest.rows),
            "rows_added": dg.MetadataValue.int(manifest.rows_added),
            "rows_removed": dg.MetadataValue.int(manifest.rows_removed),
            "shards": dg.MetadataValue.int(len(manifest.shards)),
            "batches": dg.MetadataValue.text(", ".join(manifest.batches)),
            "dedup_index_added": dg.MetadataValue.int(indexed),
            "left_out": counts_md(assembled.skipped, "reason"),
            "preview": preview_md(published),
        },
        check_results=[
            schema_check(published, asset),
            unique_ids_check(published, asset),
            _verified_check(datasets, manifest.ref, asset),
        ],
    )


@dg.asset(
    group_name="publish",
    kinds={"parquet"},
    check_specs=check_specs("sft_dataset", ["schema_valid", "unique_ids", "shards_verified"]),
)
def sft_dataset(
    context: dg.AssetExecutionContext,
    factory: FactoryResource,
    curated_samples: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """The SFT dataset: a new version under PTF_HOME/datasets/<name>/v<N>/ when the rows changed.

    Built from every batch so far (SFT and code rows; auto-accepted or accepted by an expert);
    identical rows and config republish nothing (the run reports the existing version).
    """
    return _publish(context, factory, curated_samples, "sft")


@dg.asset(
    group_name="publish",
    kinds={"parquet"},
    check_specs=check_specs("preference_dataset", ["schema_valid", "unique_ids", "shards_verified"]),
)
def preference_dataset(
    context: dg.AssetExecutionContext,
    factory: FactoryResource,
    curated_samples: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """The preference (DPO) dataset: chosen/rejected pairs from expert A/B choices and from expert
    corrections (the corrected answer over the original); a new version when the pairs changed."""
    return _publish(context, factory, curated_samples, "preference")
