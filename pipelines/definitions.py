"""The one ``Definitions`` of ptfactory (``dagster dev`` loads it via ``[tool.dagster]``)."""

from __future__ import annotations

import os

import dagster as dg

from ptfactory.assets.agent import agent_tasks, agent_trajectories
from ptfactory.assets.annotation import curated_samples, human_labels, review_queue
from ptfactory.assets.datasets import preference_dataset, sft_dataset
from ptfactory.assets.dedup import deduplicated_samples
from ptfactory.assets.execution import execution_validated
from ptfactory.assets.generation import candidate_instructions, candidate_responses
from ptfactory.assets.judging import judged_samples
from ptfactory.assets.resources import FactoryResource, SampleIOManager
from ptfactory.assets.scoring import difficulty_scored, routed_samples
from ptfactory.assets.seeds import seed_tasks
from ptfactory.pipelines.jobs import curation_job, factory_job, review_job
from ptfactory.pipelines.schedules import new_batches
from ptfactory.pipelines.sensors import human_labels_sensor
from ptfactory.pipelines.training_job import train_sft_job

defs = dg.Definitions(
    assets=[
        seed_tasks,
        candidate_instructions,
        candidate_responses,
        agent_tasks,
        agent_trajectories,
        deduplicated_samples,
        execution_validated,
        difficulty_scored,
        judged_samples,
        routed_samples,
        review_queue,
        human_labels,
        curated_samples,
        sft_dataset,
        preference_dataset,
    ],
    jobs=[factory_job, review_job, curation_job, train_sft_job],
    sensors=[human_labels_sensor],
    schedules=[new_batches],
    resources={
        "factory": FactoryResource(config_path=os.environ.get("PTF_CONFIG", "factory.yaml")),
        "samples_io": SampleIOManager(),
    },
)
