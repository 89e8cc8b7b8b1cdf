"""``new_batches``: every hour, each new seed file dropped in ``<project>/seeds/inbox/`` becomes a
batch and a factory run. Off by default: turn it on in the UI (Automation) when wanted."""

from __future__ import annotations

import dagster as dg

from ptfactory.assets.partitions import BATCH_PARTITIONS_NAME
from ptfactory.assets.resources.settings import SettingsResource, record_batch_config
from ptfactory.errors import SeedError
from ptfactory.filters.privacy.seedfiles import SIDECAR, redact_seed_files
from ptfactory.generators.seeds import read_seeds
from ptfactory.home import project_root
from ptfactory.pipelines.jobs import FACTORY_JOB
from ptfactory.storage.seedstore import SeedStore, batch_name

INBOX = "seeds/inbox"


@dg.schedule(
    name="new_batches",
    cron_schedule="0 * * * *",
    job_name=FACTORY_JOB,
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description=f"Each new .jsonl/.parquet in {INBOX}/ becomes a batch and a factory run (off by default).",
)
def new_batches(
    context: dg.ScheduleEvaluationContext, settings: SettingsResource
) -> dg.SkipReason | list[dg.RunRequest]:
    inbox = project_root() / INBOX
    files = sorted(p for p in inbox.glob("*") if p.suffix in (".jsonl", ".parquet") and p.is_file())
    current = settings.from_file()  # what a new batch runs under, and records
    requests = []
    known = set(context.instance.get_dynamic_partitions(BATCH_PARTITIONS_NAME))
    for file in files:
        batch = batch_name([file], file)
        if batch in known:
            continue
        try:
            read_seeds(file, current.config.seeds.max_field_chars)
        except SeedError as exc:  # a bad file waits, named in the tick's log, until it is fixed
            context.log.warning(str(exc))
            continue
        # redacted before staging, as `ptf run` does (filters/privacy/seedfiles.py)
        redacted = redact_seed_files([file], current.config.privacy)
        SeedStore(settings.resolved_home).stage(
            [file], batch, redacted.contents, {SIDECAR: redacted.sidecar()}
        )
        # the batch runs under the config current now, and keeps it (assets/resources/settings.py)
        record_batch_config(settings.resolved_home, batch, current.path)
        context.instance.add_dynamic_partitions(BATCH_PARTITIONS_NAME, [batch])
        requests.append(dg.RunRequest(run_key=batch, partition_key=batch, tags={"ptf/batch": batch}))
    return requests or dg.SkipReason(f"no new seed files in {inbox}")
