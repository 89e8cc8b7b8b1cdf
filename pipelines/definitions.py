"""The one ``Definitions`` of ptfactory (``dagster dev`` loads it via ``[tool.dagster]``)."""

from __future__ import annotations

import os

import dagster as dg

from ptfactory.assets.agent import agent_tasks, agent_trajectories
from ptfactory.assets.annotation import curated_samples, human_labels, review_queue
from ptfactory.assets.calibration import judge_calibration
from ptfactory.assets.datasets import preference_dataset, sft_dataset
from ptfactory.assets.decontamination import decontaminated_samples
from ptfactory.assets.dedup import deduplicated_samples
from ptfactory.assets.execution import execution_validated
from ptfactory.assets.failures import failure_seeds_asset
from ptfactory.assets.generation import candidate_instructions, candidate_responses
from ptfactory.assets.judging import judged_samples
from ptfactory.assets.panel_probe import judged_samples_panel_probe
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.rl import rl_dataset
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
        decontaminated_samples,
        execution_validated,
        difficulty_scored,
        judged_samples,
        routed_samples,
        review_queue,
        human_labels,
        curated_samples,
        judge_calibration,
        sft_dataset,
        preference_dataset,
        rl_dataset,
        failure_seeds_asset,
    ],
    asset_checks=[judged_samples_panel_probe],
    jobs=[factory_job, review_job, curation_job, train_sft_job],
    sensors=[human_labels_sensor],
    schedules=[new_batches],
    # every run acts under its batch's recorded config (a run of no batch: the newest batch's);
    # PTF_CONFIG (default factory.yaml) only where no batch recorded one
    resources=factory_resources(os.environ.get("PTF_CONFIG", "factory.yaml")),
)
