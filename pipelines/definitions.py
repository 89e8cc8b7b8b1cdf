"""The one ``Definitions`` of ptfactory (``dagster dev`` loads it via ``[tool.dagster]``)."""

from __future__ import annotations

import os

import dagster as dg

from assets.datasets import sft_dataset
from assets.dedup import deduplicated_samples
from assets.execution import execution_validated
from assets.generation import candidate_instructions, candidate_responses
from assets.scoring import difficulty_scored, judged_samples, routed_samples
from assets.seeds import seed_tasks
from pipelines.jobs import factory_job
from pipelines.resources import FactoryResource, SampleIOManager

defs = dg.Definitions(
    assets=[
        seed_tasks,
        candidate_instructions,
        candidate_responses,
        deduplicated_samples,
        execution_validated,
        difficulty_scored,
        judged_samples,
        routed_samples,
        sft_dataset,
    ],
    jobs=[factory_job],
    resources={
        "factory": FactoryResource(config_path=os.environ.get("PTF_CONFIG", "factory.yaml")),
        "samples_io": SampleIOManager(),
    },
)
