"""``human_labels_sensor``: what experts do in Label Studio flows back without anyone asking.

Every ``annotation.curation_interval_s`` (30 s by default) an evaluation first delivers review-queue
rows that hold a slot but never reached Label Studio (it was down when their batch was routed) —
through the one pusher the ``review_queue`` asset and ``ptf annotate push`` use, which reads the
queue's index of pending rows, never the routed files — so the review queue catches up by itself
once the server is back; then it pulls annotations touched since the ledger's watermark
(incremental, page by page, each page committed with its watermark), and when the log grew it
requests a run that materializes ``human_labels`` → ``curated_samples`` → the datasets. Each batch's
rows go where that batch's recorded config says, and the curation run acts under the newest batch's
config (assets/resources/settings.py), whatever factory.yaml is current. A tick reads each batch's
recorded config once, however many of its rows it pushes (the resources live for one evaluation
and cache by batch), and again on the next tick, so a batch rerun under another config is seen.
The sensor's cursor is the log's last sequence number, so a restarted daemon neither misses nor
repeats a run. One evaluation requests at most one run, so labels arriving in a burst start one
curation run per interval, not one per label (the debounce).
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from ptfactory.annotators.labelstudio.settings import AnnotationConfig
from ptfactory.assets.resources.labelstudio import LabelStudioResource
from ptfactory.config import load_config
from ptfactory.errors import AnnotationError
from ptfactory.home import project_root
from ptfactory.pipelines.jobs import CURATION_JOB

SENSOR_NAME = "human_labels_sensor"


def evaluate(
    context: dg.SensorEvaluationContext, label_studio: LabelStudioResource
) -> dg.SensorResult | dg.SkipReason:
    ledger = label_studio.ledger()
    try:
        queued = label_studio.push_queue()
        if queued.total_created:
            context.log.info(f"pushed {queued.total_created} review tasks that were waiting for Label Studio")
        result = label_studio.pull()
    except AnnotationError as exc:
        # what was committed before the server went away stays; the next tick resumes from there
        context.log.warning(str(exc))
        return dg.SkipReason(f"Label Studio unreachable: {exc}")
    last = ledger.last_seq()
    previous = int(context.cursor) if context.cursor else 0
    if last <= previous:
        return dg.SkipReason(f"no new labels ({result.tasks_read} tasks read)")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=f"labels-{last}", tags={"ptf/labels_seq": str(last)})],
        cursor=str(last),
    )


def configured_interval() -> int:
    """``annotation.curation_interval_s`` of the project's factory.yaml (``$PTF_CONFIG``), read when
    the definitions load (Dagster fixes a sensor's interval then); the default without one."""
    path = Path(os.environ.get("PTF_CONFIG", "factory.yaml"))
    if not path.is_absolute():
        path = project_root() / path
    if not path.exists():
        return AnnotationConfig().curation_interval_s
    return load_config(path).annotation.curation_interval_s


def build_label_sensor(interval_s: int) -> dg.SensorDefinition:
    @dg.sensor(
        name=SENSOR_NAME,
        job_name=CURATION_JOB,
        minimum_interval_seconds=interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Every {interval_s} s: pulls new and changed Label Studio annotations; re-curates (one run at "
            "most) when the log grew."
        ),
    )
    def human_labels_sensor(
        context: dg.SensorEvaluationContext, label_studio: LabelStudioResource
    ) -> dg.SensorResult | dg.SkipReason:
        return evaluate(context, label_studio)

    return human_labels_sensor


human_labels_sensor = build_label_sensor(configured_interval())
