"""``review_queue``, ``human_labels`` and ``curated_samples``: experts in the loop, through Label Studio.

Data flows one way: each batch's routing appends its rows that need a human to the review queue
(``routed_samples``: annotators/review_queue.py); ``review_queue`` delivers the rows that hold a
review slot to Label Studio (the one pusher); the label sensor pulls what experts did into the
label log (``human_labels``); ``curated_samples`` folds what changed since its last run into the
curated table (annotators/recuration.py), and the datasets publish from it.
"""

import posixpath
import statistics

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from ptfactory.annotators.recuration import recurate
from ptfactory.assets.common import check_specs, counts_md, preview_md, schema_check
from ptfactory.assets.resources.labelstudio import LabelStudioResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.storage.fs import Store


class ReviewQueueConfig(dg.Config):
    batches: list[str] = Field(
        default_factory=list,
        description="push only the rows these batches' review budgets gave a slot (default: every row)",
    )


@dg.asset(group_name="review", kinds={"labelstudio", "sqlite"}, deps=["routed_samples"])
def review_queue(
    config: ReviewQueueConfig, settings: SettingsResource, label_studio: LabelStudioResource
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Every row waiting for an expert, across batches (routing appends to it; expert decisions
    drain it): the rows that hold a review slot go to Label Studio as tasks (one project per kind,
    where their batch's config says), with the judges' votes pre-filled and the corrected-response
    box starting from the response; audit rows go blind (no votes, nothing pre-filled) to the
    kind's audit project. Rows still waiting for a slot stay until a later batch's budget gives
    them one. Idempotent: a row already in Label Studio is not pushed again."""
    result = label_studio.push_queue(config.batches or None)
    states = settings.review_queue().counts()
    return dg.MaterializeResult(
        metadata={
            "tasks_created": dg.MetadataValue.int(result.total_created),
            "already_pushed": dg.MetadataValue.int(sum(result.existing.values())),
            "from_earlier_batches": dg.MetadataValue.int(result.promoted),
            "audit_tasks": dg.MetadataValue.int(
                sum(n for q, n in result.created.items() if q.endswith("-audit"))
            ),
            "created_per_queue": counts_md(result.created, "queue"),
            "queue_states": counts_md(states, "state"),
            "waiting_for_a_slot": dg.MetadataValue.int(states.get("waiting", 0)),
            "awaiting_an_expert": dg.MetadataValue.int(states.get("review", 0)),
            "projects": dg.MetadataValue.json(result.projects),
        }
    )


@dg.asset(group_name="review", kinds={"sqlite"})
def human_labels(settings: SettingsResource, label_studio: LabelStudioResource) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """The append-only log of what experts did in Label Studio (created, updated, deleted
    annotations), as the ``human_labels_sensor`` pulled it; a snapshot lands as Parquet."""
    events = label_studio.ledger().events()
    store = Store(settings.resolved_home)
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
    deps=["routed_samples", human_labels, review_queue],
    group_name="review",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("curated_samples", ["schema_valid"]),
)
def curated_samples(settings: SettingsResource, label_studio: LabelStudioResource) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Routed samples with the experts' decisions folded in: accepted in, rejected out, corrected
    responses in place (the original kept in the trail) plus a (corrected, original) preference
    pair, A/B choices as chosen/rejected. Rows not yet labeled keep waiting. Each run folds in what
    changed since the last (batches routed since, review-queue rows changed, new labels): it reads
    its previous output and those batches' routed outputs, nothing else of the history."""
    store = settings.asset_store()
    previous = store.read("curated_samples") if store.exists("curated_samples") else None

    def routed(batch: str) -> pa.Table | None:
        return store.read("routed_samples", batch) if store.exists("routed_samples", batch) else None

    def every_batch() -> list[str]:
        stored = [posixpath.basename(path).removesuffix(".parquet") for path in store.files("routed_samples")]
        return sorted({*settings.review_queue().admitted(), *stored})

    done = recurate(
        previous,
        settings.review_queue(),
        label_studio.ledger(),
        routed,
        every_batch,
        accept_at=settings.config.routing.accept_at,
    )
    curated = done.curated
    table = curated.table
    metadata = {
        "dagster/row_count": dg.MetadataValue.int(table.num_rows),
        "review_outcomes": counts_md(curated.counts, "outcome"),
        "labels_per_annotator": counts_md(curated.per_annotator, "annotator: verdict"),
        "multi_annotated_samples": dg.MetadataValue.int(curated.multi_annotated),
        "judge_human_pairs": dg.MetadataValue.int(curated.judge_human_pairs),
        # what this run cost: the routed outputs it read and the rows it curated again
        "routed_batches_read": dg.MetadataValue.int(len(done.batches_read)),
        "rows_curated_again": dg.MetadataValue.int(done.rows_curated),
        "full_curation": dg.MetadataValue.bool(done.full),
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
