"""Jobs: ``factory`` runs every stage for one ``batch``; ``review`` pushes a batch's review queue to
Label Studio; ``curation`` folds expert labels in and republishes (the label sensor starts it)."""

import dagster as dg

FACTORY_JOB = "factory"
REVIEW_JOB = "review"
CURATION_JOB = "curation"

_REVIEW = dg.AssetSelection.assets("review_queue")

factory_job = dg.define_asset_job(
    FACTORY_JOB,
    selection=dg.AssetSelection.all() - _REVIEW,
    description="Every stage for one batch, then publish new dataset versions.",
)

review_job = dg.define_asset_job(
    REVIEW_JOB,
    selection=_REVIEW,
    description="Push a batch's rows routed to expert review into Label Studio (idempotent).",
)

curation_job = dg.define_asset_job(
    CURATION_JOB,
    selection=dg.AssetSelection.assets(
        "human_labels", "curated_samples", "sft_dataset", "preference_dataset"
    ),
    description="Fold the experts' labels into the data and publish new dataset versions.",
)
