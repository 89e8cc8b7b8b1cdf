"""Jobs: ``factory`` materializes the whole graph for one ``batch`` partition."""

import dagster as dg

FACTORY_JOB = "factory"

factory_job = dg.define_asset_job(
    FACTORY_JOB,
    selection=dg.AssetSelection.all(),
    description="Every stage for one batch, then publish new dataset versions.",
)
