"""``sft_dataset``: publishes a new immutable version from every batch so far."""

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.assets.audit import AUDIT_CHECKS, leak_key_cache, publish_audit
from ptfactory.assets.calibration import STATS_KEY, version_calibration, version_calibration_metadata
from ptfactory.assets.common import check_specs, counts_md, preview_md
from ptfactory.assets.dataset_delta import plan_change
from ptfactory.assets.resources.engines import EnginesResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.assets.version_figures import (
    decontamination_stats,
    figures_metadata,
    remember_prompts,
    version_diversity,
)
from ptfactory.config import FactoryConfig
from ptfactory.errors import PublishError
from ptfactory.filters.dedup.core import DedupConfig, compute_signatures
from ptfactory.filters.dedup.leak_keys import KeyCache
from ptfactory.filters.dedup.leaks import split_leaks
from ptfactory.filters.dedup.minhash import SHINGLE_HASH, hash_library
from ptfactory.storage.assemble import assemble_preference, assemble_sft
from ptfactory.storage.rebase import rebase
from ptfactory.storage.retract import retracted
from ptfactory.storage.schema import row_texts
from ptfactory.storage.split import split_table
from ptfactory.storage.versions import AuditFailed, BaseMoved, DatasetStore, PublishResult

_REBASES = 20  # times a publish goes over a newer version before it gives up


def _describe(name: str, body: dict[str, Any]) -> str:
    detail = ", ".join(f"{k}={v}" for k, v in body["detail"].items())
    rows = f"; rows: {', '.join(body['rows'][:10])}" if body.get("rows") else ""
    return f"{'passed' if body['passed'] else 'FAILED'} on the staged version: {detail}{rows}"


def audit_check_results(
    asset: str, checks: dict[str, Any], absent: str = "not run: not applicable to this version"
) -> list[dg.AssetCheckResult]:
    """The staged version's audit, as Dagster sees it (every check of the spec reported; one that
    did not run says why)."""
    results = []
    for name in AUDIT_CHECKS:
        body = checks.get(name) or {"passed": True, "detail": {"status": absent}, "rows": []}
        metadata: dict[str, Any] = {
            k: v if isinstance(v, int | float | str) else str(v) for k, v in body["detail"].items()
        }
        if body.get("rows"):
            metadata["rows"] = ", ".join(body["rows"][:10])
        results.append(
            dg.AssetCheckResult(
                check_name=f"{asset}_{name}",
                passed=bool(body["passed"]),
                description=_describe(name, body),
                severity=dg.AssetCheckSeverity.ERROR,
                metadata=metadata,
            )
        )
    return results


def _version_stats(
    price_per_mtok: float, extra: dict[str, Any]
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """What the version cost to make (generation tokens of its rows) and how it splits, from the
    totals the publish computed over the version's rows (a delta publish never sees them all)."""

    def stats(base: Mapping[str, Any]) -> dict[str, Any]:
        tokens = base.get("generation_tokens") or {}
        prompt, completion = int(tokens.get("prompt", 0)), int(tokens.get("completion", 0))
        return {
            "generation_prompt_tokens": prompt,
            "generation_completion_tokens": completion,
            "estimated_cost_usd": round((prompt + completion) * price_per_mtok / 1e6, 6),
            "split_rows": dict(base.get("rows_per_split") or {}),
            "kinds": dict(base.get("rows_per_kind") or {}),
            # which hash built the rows' MinHash signatures: an index of another hash cannot match them
            "dedup": {"shingle_hash": SHINGLE_HASH, "hash_library": hash_library()},
            **extra,
        }

    return stats


def _without_leaks(splits: dict[str, pa.Table], dedup: DedupConfig) -> tuple[dict[str, pa.Table], int]:
    """The split with every validation row that is a near duplicate of a train row moved to train.

    The split keys rows by dedup cluster, but cluster ids are per batch: near duplicates from two
    batches routed before either was published can land on both sides. Moving them here keeps the
    staged version's blocking ``no_split_leak`` check a guard, not a stop to all publishing."""
    moved = 0
    for _ in range(50):  # each round moves at least one row; a moved row may pull its neighbours
        if "validation" not in splits:
            break
        count, leaks = split_leaks(splits, dedup, limit=1 << 30)
        if not count:
            break
        ids = pa.array(sorted({leak.validation_id for leak in leaks}), pa.string())
        validation = splits["validation"]
        leaving = pc.is_in(validation.column("sample_id"), value_set=ids)
        moved += int(pc.sum(leaving).as_py() or 0)
        train = pa.concat_tables([splits["train"], validation.filter(leaving)])
        rest = validation.filter(pc.invert(leaving))
        splits = {"train": train, "validation": rest} if rest.num_rows else {"train": train}
    return splits, moved


def _index_published(settings: SettingsResource, table: pa.Table, name: str, version: int) -> int:
    """Later batches are deduplicated against what this version published; only rows the index
    does not hold yet are hashed (a new label costs one row, not the version). ``table``: the rows
    the version put in (a delta publish's upserts), or all of them."""
    dedup = settings.config.dedup
    index = settings.dedup_index()
    new = index.missing(table.column("sample_id").to_pylist())
    if not new:
        return 0
    table = table.filter(pc.is_in(table.column("sample_id"), value_set=pa.array(new, pa.string())))
    hashed = compute_signatures(row_texts(table), dedup)
    return index.add(
        table.column("sample_id").to_pylist(),
        hashed.signatures,
        name,
        version,
        table.column("batch").to_pylist(),
    )


def _publish_rows(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    name: str,
    table: pa.Table,
    *,
    common: dict[str, Any],
    extra: dict[str, Any],
) -> tuple[PublishResult, pa.Table, str]:
    """Publish ``table`` (every row the version should hold): as the change over the latest version
    when one can be found (only the rows that changed are split, mended, written and audited), else
    whole. Returns the result, the rows it put in (to index), and how it was published."""
    config = settings.config
    datasets = settings.datasets()
    cache = leak_key_cache(settings)
    # What the version is built from, read in this order: the latest version first, the retractions
    # after it. A retraction or another run's batch published later is a newer latest, which the
    # publish (checking its base under the lock, or settled below its claim on an object store)
    # refuses with BaseMoved: then this run's change is moved onto that version and planned again.
    base = datasets.latest(name)
    for _ in range(_REBASES):
        table, dropped = retracted(datasets, name).leave_out(table)
        if dropped:
            common["batches"] = sorted(set(table.column("batch").to_pylist()))
        try:
            return _publish_over(
                datasets, config, name, table, base=base, cache=cache, common=common, extra=extra
            )
        except BaseMoved:
            onto = datasets.latest(name)
            context.log.info(
                f"{name} moved from v{base} to v{onto} while this run planned: its change goes over v{onto}"
            )
            table = rebase(datasets, name, table, base=base, onto=onto)
            common["batches"] = sorted(set(table.column("batch").to_pylist()))
            base = onto
    raise PublishError(
        f"{name}: other versions kept landing while this run published ({_REBASES} tries); run it again"
    )


def _publish_over(
    datasets: DatasetStore,
    config: FactoryConfig,
    name: str,
    table: pa.Table,
    *,
    base: int,
    cache: KeyCache,
    common: dict[str, Any],
    extra: dict[str, Any],
) -> tuple[PublishResult, pa.Table, str]:
    """Publish ``table`` over ``v<base>`` (0: none yet), raising BaseMoved if that is not the latest."""
    price = config.engines.generator.price_per_mtok
    extra = {**extra, "diversity": version_diversity(table, config)}  # of the rows the version holds
    parent = datasets.manifest(name, base) if base else None
    change = None
    if parent is not None:
        change = plan_change(
            datasets,
            parent,
            table,
            config_hash=common["config_hash"],
            fraction=config.datasets.validation_fraction,
            dedup=config.dedup,
            cache=cache,
        )
    if parent is not None and change is not None:
        stats = _version_stats(price, {**extra, "moved_to_train": change.moved})
        result = datasets.publish_delta(
            name, change.upserts, change.removed, base=parent.version, stats=stats, **common
        )
        how = (
            f"delta: {change.rows.num_rows} row(s) in, {len(change.removed)} out, "
            f"{change.read_rows} row(s) of v{parent.version} read"
        )
        return result, change.rows, how
    splits, moved = _without_leaks(split_table(table, config.datasets.validation_fraction), config.dedup)
    # near duplicates of train rows that the split had held out: moved_to_train
    stats = _version_stats(price, {**extra, "moved_to_train": moved})
    result = datasets.publish(
        name,
        splits if len(splits) > 1 else splits["train"],  # one split: plain part-*.parquet shards
        stats=stats,
        base=base,
        **common,
    )
    return result, table, "full table"


def publish_assembled(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    *,
    name: str,
    kind: str,
    assembled: Any,
    extra: dict[str, Any],
    metadata: Mapping[str, Any] | None = None,
) -> tuple[PublishResult, pa.Table, str] | dg.MaterializeResult:  # type: ignore[type-arg]
    """Publish an assembled ``kind`` version of ``name`` (the sft, preference and rl assets share
    it): the result, the rows put in and how; or, when the audit refuses it, the asset's result
    saying so (nothing published, no alias moved: the failed checks, blocking, stop the run)."""
    common: dict[str, Any] = {
        "kind": kind,
        # the config this run acts under (the newest batch's: assets/resources/settings.py)
        "config_hash": settings.run_config.hash,
        "shard_rows": settings.config.storage.shard_rows,
        "dagster_run_id": context.run.run_id,
        "batches": assembled.batches,
        "audit": publish_audit(settings, engines.chat_tokenizer),
    }
    try:
        return _publish_rows(context, settings, name, assembled.table, common=common, extra=extra)
    except AuditFailed as refused:
        context.log.error(str(refused))
        return dg.MaterializeResult(
            metadata={
                "created": dg.MetadataValue.bool(False),
                "refused": dg.MetadataValue.text(str(refused)),
                "left_out": counts_md(assembled.skipped, "reason"),
                **(metadata or {}),
            },
            check_results=audit_check_results(
                f"{kind}_dataset", {c.name: c.to_json() for c in refused.results}
            ),
        )


def _publish(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    curated: pa.Table,
    kind: str,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    config = settings.config
    asset = f"{kind}_dataset"
    assembled = assemble_sft(curated) if kind == "sft" else assemble_preference(curated)
    datasets = settings.datasets()
    name = config.datasets.sft if kind == "sft" else config.datasets.preference
    taken_out = retracted(datasets, name)
    if taken_out:
        # `ptf datasets retract` took these rows out of an earlier version: curation never brings them back
        mask = taken_out.mask(assembled.table)
        kept = assembled.table.filter(pc.invert(mask))
        assembled.skipped["retracted"] = assembled.table.num_rows - kept.num_rows
        assembled.table = kept
        assembled.batches = sorted(set(kept.column("batch").to_pylist()))
    if assembled.table.num_rows == 0 and not datasets.versions(name):
        # nothing to publish yet (no pairs before experts label): no empty v1
        return dg.MaterializeResult(
            metadata={
                "created": dg.MetadataValue.bool(False),
                "left_out": counts_md(assembled.skipped, "reason"),
            },
            check_results=audit_check_results(asset, {}, absent="not run: nothing to publish yet"),
        )
    # each batch's own config hash beside the version's (batches run under different configs meet here)
    extra: dict[str, Any] = {
        "batch_configs": settings.batch_hashes(assembled.batches),
        "decontamination": decontamination_stats(settings),  # what no_benchmark_overlap checked against
    }
    if kind == "sft":
        extra[STATS_KEY] = version_calibration(curated, config)  # a report: the panel reads the store
    published_or_refused = publish_assembled(
        context, settings, engines, name=name, kind=kind, assembled=assembled, extra=extra
    )
    if isinstance(published_or_refused, dg.MaterializeResult):
        return published_or_refused
    result, added, how = published_or_refused
    manifest = result.manifest
    # what was published is what was assembled (publish only conforms and sorts it): no read-back
    published = assembled.table
    indexed = (
        _index_published(settings, added, manifest.name, manifest.version)
        if result.created and kind == "sft"
        else 0
    )
    remembered = remember_prompts(settings, added) if result.created else 0  # for semantic dedup
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
            "semantic_index_added": dg.MetadataValue.int(remembered),
            **figures_metadata(manifest.stats),  # the version's diversity, the index it was checked against
            # how the version was made: the rows that changed over the latest (delta) or every row
            "publish": dg.MetadataValue.text(how),
            "left_out": counts_md(assembled.skipped, "reason"),
            # the version's (an unchanged republish keeps the existing version's)
            **version_calibration_metadata(manifest.stats),
            "preview": preview_md(published),
        },
        # an unchanged republish reports the audit the existing version passed
        check_results=audit_check_results(asset, manifest.checks),
    )


@dg.asset(
    group_name="publish",
    kinds={"parquet"},
    check_specs=check_specs("sft_dataset", AUDIT_CHECKS, blocking=True),
)
def sft_dataset(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    curated_samples: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """The SFT dataset: a new version under PTF_HOME/datasets/<name>/v<N>/ when the rows changed.

    Built from every batch so far (SFT and code rows; auto-accepted or accepted by an expert);
    identical rows and config republish nothing (the run reports the existing version).
    """
    return _publish(context, settings, engines, curated_samples, "sft")


@dg.asset(
    group_name="publish",
    kinds={"parquet"},
    check_specs=check_specs("preference_dataset", AUDIT_CHECKS, blocking=True),
)
def preference_dataset(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    curated_samples: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """The preference (DPO) dataset: chosen/rejected pairs from expert A/B choices and from expert
    corrections (the corrected answer over the original); a new version when the pairs changed."""
    return _publish(context, settings, engines, curated_samples, "preference")
