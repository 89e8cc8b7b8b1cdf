"""``human_labels_sensor``: what experts do in Label Studio flows back without anyone asking.

Every ``annotation.curation_interval_s`` (30 s by default) an evaluation first pushes routed rows that never reached Label Studio (it was down when
their batch was routed), so the review queue catches up by itself once the server is back; then it
pulls annotations touched since the ledger's watermark (incremental, page by page, each page
committed with its watermark), and when the log grew it requests a run that
materializes ``human_labels`` → ``curated_samples`` → the datasets. The sensor's cursor is the
log's last sequence number, so a restarted daemon neither misses nor repeats a run. One
evaluation requests at most one run, so labels arriving in a burst start one curation run per
interval, not one per label (the debounce).
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from ptfactory.annotators.labelstudio.client import LabelStudioClient
from ptfactory.annotators.labelstudio.ledger import Ledger
from ptfactory.annotators.labelstudio.sync import pull, push, review_rows
from ptfactory.assets.resources import FactoryResource
from ptfactory.config import AnnotationSection, load_config
from ptfactory.errors import AnnotationError
from ptfactory.home import project_root
from ptfactory.pipelines.jobs import CURATION_JOB
from ptfactory.storage.assetstore import AssetStore

SENSOR_NAME = "human_labels_sensor"


def sync_review_queue(factory: FactoryResource, client: LabelStudioClient, ledger: Ledger) -> int:
    """Push routed rows no push has delivered (Label Studio was down when their batch ran, or the
    review job was never run); returns how many tasks were created."""
    store = AssetStore(factory.resolved_home)
    rows = []
    for path in store.files("routed_samples"):
        rows.extend(review_rows(store.read_file(path)))
    if not rows:
        return 0
    result = push(
        client,
        ledger,
        rows,
        prefix=factory.config.annotation.project_prefix,
        accept_at=factory.config.routing.accept_at,
        batch_size=factory.config.annotation.push_batch,
    )
    return result.total_created


def evaluate(
    context: dg.SensorEvaluationContext, factory: FactoryResource
) -> dg.SensorResult | dg.SkipReason:
    section = factory.config.annotation
    ledger = factory.label_ledger()
    try:
        client = factory.label_studio_client()
    except AnnotationError as exc:
        return dg.SkipReason(str(exc))
    try:
        queued = sync_review_queue(factory, client, ledger)
        if queued:
            context.log.info(f"pushed {queued} review tasks that were waiting for Label Studio")
        result = pull(client, ledger, prefix=section.project_prefix, page_size=section.pull_page)
    except AnnotationError as exc:
        # what was committed before the server went away stays; the next tick resumes from there
        context.log.warning(str(exc))
        return dg.SkipReason(f"Label Studio unreachable: {exc}")
    finally:
        client.close()
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
        return AnnotationSection().curation_interval_s
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
        context: dg.SensorEvaluationContext, factory: FactoryResource
    ) -> dg.SensorResult | dg.SkipReason:
        return evaluate(context, factory)

    return human_labels_sensor


human_labels_sensor = build_label_sensor(configured_interval())
