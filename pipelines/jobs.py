"""Jobs: ``factory`` runs every stage for one ``batch``; ``review`` pushes the review queue's rows
that hold a slot to Label Studio; ``curation`` folds expert labels in and republishes (the label
sensor starts it)."""

import dagster as dg

FACTORY_JOB = "factory"
REVIEW_JOB = "review"
CURATION_JOB = "curation"

_REVIEW = dg.AssetSelection.assets("review_queue")
# follows an evaluation, not a batch: materialized on demand (assets/failures.py)
_ON_DEMAND = dg.AssetSelection.assets("failure_seeds")

factory_job = dg.define_asset_job(
    FACTORY_JOB,
    selection=dg.AssetSelection.all() - _REVIEW - _ON_DEMAND,
    description="Every stage for one batch, then publish new dataset versions.",
)

review_job = dg.define_asset_job(
    REVIEW_JOB,
    selection=_REVIEW,
    description="Push the review queue's rows that hold a review slot into Label Studio (idempotent).",
)

curation_job = dg.define_asset_job(
    CURATION_JOB,
    selection=dg.AssetSelection.assets(
        "human_labels",
        "curated_samples",
        "judge_calibration",  # the judges fitted on the new labels (the calibration store)
        "sft_dataset",
        "preference_dataset",
        "rl_dataset",
    ),
    description="Fold the experts' labels into the data and publish new dataset versions.",
)
