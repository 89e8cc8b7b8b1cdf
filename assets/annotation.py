"""``review_queue``, ``human_labels`` and ``curated_samples``: experts in the loop, through Label Studio."""

import statistics

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.annotators.curation import curate
from ptfactory.annotators.labelstudio.sync import push, review_rows
from ptfactory.assets.common import check_specs, counts_md, preview_md, schema_check
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import FactoryResource
from ptfactory.storage.fs import Store


@dg.asset(
    partitions_def=batch_partitions,
    group_name="review",
    kinds={"labelstudio"},
)
def review_queue(
    context: dg.AssetExecutionContext, factory: FactoryResource, routed_samples: pa.Table
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """The batch's rows routed to expert review, as Label Studio tasks (one project per kind) with
    the judges' votes pre-filled and the corrected-response box starting from the response; its
    audit rows go blind (no votes, nothing pre-filled) to the kind's audit project. Earlier
    batches' waiting rows this batch's budget promoted are in its routed_samples, so they go
    too. Idempotent: a row already pushed is not pushed again."""
    section = factory.config.annotation
    rows = review_rows(routed_samples)
    batch = context.partition_key
    client = factory.label_studio_client()
    try:
        result = push(
            client,
            factory.label_ledger(),
            rows,
            prefix=section.project_prefix,
            accept_at=factory.config.routing.accept_at,
            batch_size=section.push_batch,
        )
    finally:
        client.close()
    return dg.MaterializeResult(
        metadata={
            "tasks_created": dg.MetadataValue.int(result.total_created),
            "already_pushed": dg.MetadataValue.int(sum(result.existing.values())),
            "from_earlier_batches": dg.MetadataValue.int(sum(1 for row in rows if row["batch"] != batch)),
            "audit_tasks": dg.MetadataValue.int(
                sum(n for q, n in result.created.items() if q.endswith("-audit"))
            ),
            "created_per_queue": counts_md(result.created, "queue"),
            "projects": dg.MetadataValue.json(
                {q: f"{client.url}/projects/{p}" for q, p in result.projects.items()}
            ),
        }
    )


@dg.asset(group_name="review", kinds={"sqlite"})
def human_labels(factory: FactoryResource) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """The append-only log of what experts did in Label Studio (created, updated, deleted
    annotations), as the ``human_labels_sensor`` pulled it; a snapshot lands as Parquet."""
    events = factory.label_ledger().events()
    store = Store(factory.resolved_home)
    path = store.path("assets", "human_labels", "log.parquet")
    store.makedirs(store.path("assets", "human_labels"))
    with store.atomic_writer(path) as handle:
        pq.write_table(events, handle, compression="zstd")
    kinds = events.column("event").to_pylist()
    leads = [v for v in events.column("lead_time_s").to_pylist() if v is not None]
    annotators = {a for a in events.column("annotator").to_pylist() if a}
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": dg.MetadataValue.int(events.num_rows),
            "events": counts_md({k: kinds.count(k) for k in set(kinds)}, "event"),
            "annotators": dg.MetadataValue.int(len(annotators)),
            "median_lead_time_s": dg.MetadataValue.float(statistics.median(leads) if leads else 0.0),
            "last_seq": dg.MetadataValue.int(max(events.column("seq").to_pylist(), default=0)),
            "path": dg.MetadataValue.path(path),
        }
    )


@dg.asset(
    ins={"routed_samples": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())},
    deps=[human_labels],
    group_name="review",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("curated_samples", ["schema_valid"]),
)
def curated_samples(factory: FactoryResource, routed_samples: pa.Table) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Routed samples with the experts' decisions folded in: accepted in, rejected out, corrected
    responses in place (the original kept in the trail) plus a (corrected, original) preference
    pair, A/B choices as chosen/rejected. Rows not yet labeled keep waiting. Every batch's routed
    rows come in; a row copied into a later batch's routing counts once, in its newest copy."""
    config = factory.config
    curated = curate(routed_samples, factory.label_ledger().events(), config.routing.accept_at)
    table = curated.table
    metadata = {
        "dagster/row_count": dg.MetadataValue.int(table.num_rows),
        "review_outcomes": counts_md(curated.counts, "outcome"),
        "labels_per_annotator": counts_md(curated.per_annotator, "annotator: verdict"),
        "multi_annotated_samples": dg.MetadataValue.int(curated.multi_annotated),
        "judge_human_pairs": dg.MetadataValue.int(curated.judge_human_pairs),
        "preview": preview_md(table),
    }
    if curated.inter_annotator_alpha is not None:
        metadata["inter_annotator_alpha"] = dg.MetadataValue.float(curated.inter_annotator_alpha)
    if curated.judge_human_agreement is not None:
        metadata["judge_human_agreement"] = dg.MetadataValue.float(curated.judge_human_agreement)
    metadata["audit_pairs"] = dg.MetadataValue.int(curated.audit_pairs)
    if curated.audit_agreement is not None:
        # the audit rows were drawn at random from the automatic verdicts: an unbiased estimate
        metadata["audit_agreement"] = dg.MetadataValue.float(curated.audit_agreement)
    return dg.MaterializeResult(
        value=table,
        metadata=metadata,
        check_results=[schema_check(table, "curated_samples")],
    )
