"""``failure_seeds``: an evaluation's failures back into a seed batch (what ``ptf eval
--failures-to-seeds`` writes), as an asset the Dagster UI materializes on demand.

It reads one eval report (its config names the REPORT.json; empty: the newest evaluation of a
checkpoint the catalog records: ``ptf eval CHECKPOINT``, the ``train_sft`` job's evaluation step), loads the report's tasks again, and writes
under the state folder (PTF_HOME when local)/failure-seeds/ a seed file aimed at what failed (training/eval/failures.py: new
instances of failed procedural families, evol-instruct variants written by factory.yaml's
generator, never benchmark items, every seed decontaminated) with its provenance sidecar. Each
seed's id carries the eval run id, so the rows of the next batch (``ptf run --seeds FILE``) and the
versions they reach say which failure they answer. Not in the factory job: an evaluation, not a
batch, is what it follows.
"""

import json
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from ptfactory.assets.common import counts_md
from ptfactory.assets.pools import GPU_POOL
from ptfactory.assets.resources.engines import EnginesResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.engines.base import Engine
from ptfactory.errors import UserInputError
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.eval.evaluate import load_all
from ptfactory.training.eval.failures import failure_seeds, write_failure_seeds

__all__ = ["FAILURE_SEEDS", "FailureSeedsConfig", "failure_seeds_asset", "newest_report"]

FAILURE_SEEDS = "failure_seeds"


class FailureSeedsConfig(dg.Config):
    report: str = Field(
        "",
        description="the eval report (REPORT.json) whose failures become seeds; empty: the newest "
        "evaluation of a checkpoint the catalog records",
    )
    per_failure: int = Field(2, ge=1, le=32, description="new instances per failed procedural task")


def newest_report(datasets: DatasetStore) -> Path:
    """The report of the newest checkpoint evaluation the catalog records (``ptf eval CHECKPOINT``,
    the train job's step)."""
    exists = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'evaluations'"
    newest = (
        datasets.catalog.query("SELECT report FROM evaluations ORDER BY created_at DESC LIMIT 1")
        if datasets.catalog.query(exists) not in ([], [(0,)])
        else []
    )
    if not newest:
        raise UserInputError(
            "failure_seeds: no evaluation recorded yet; run `ptf eval` (or the train_sft job) first, "
            "or name a report in the asset's config (report: REPORT.json)"
        )
    return Path(newest[0][0])


@dg.asset(
    name=FAILURE_SEEDS,
    group_name="eval",
    kinds={"jsonl"},
    pool=GPU_POOL,  # the generator writes the evol-instruct variants (assets/pools.py)
)
def failure_seeds_asset(
    context: dg.AssetExecutionContext,
    config: FailureSeedsConfig,
    settings: SettingsResource,
    engines: EnginesResource,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """A seed file aimed at an evaluation's failures, under <state>/failure-seeds/ (module doc)."""
    datasets = settings.datasets()
    path = Path(config.report) if config.report else newest_report(datasets)
    if not path.is_file():
        raise UserInputError(
            f"failure_seeds: report {path} does not exist; name a REPORT.json `ptf eval` wrote"
        )
    try:
        report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        run_id = str(report["run_id"])
    except (ValueError, KeyError, TypeError):
        raise UserInputError(f"failure_seeds: {path} is not a `ptf eval` report (no run_id)") from None
    tasks = load_all(report["tasks"], datasets)  # the tasks as the evaluation read them
    generator: Engine = engines.engine("generator")
    seeds = failure_seeds(
        report,
        tasks,
        engine=generator,
        index=settings.decontamination_index(),
        per_failure=config.per_failure,
        say=context.log.info,
    )
    out = settings.state_dir / "failure-seeds" / f"eval-{run_id[:12]}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    sidecar = write_failure_seeds(seeds, out, report, path)
    failed = sum(1 for r in report["results"] if r["rollouts"] and r["successes"] < r["rollouts"])
    return dg.MaterializeResult(
        metadata={
            "eval_run_id": dg.MetadataValue.text(run_id),
            "report": dg.MetadataValue.path(str(path)),
            "failed_tasks": dg.MetadataValue.int(failed),
            "seeds": dg.MetadataValue.int(len(seeds.rows)),
            "path": dg.MetadataValue.path(str(out)),
            "provenance": dg.MetadataValue.path(str(sidecar)),
            "left_out": counts_md(dict(seeds.skipped), "reason"),
            "next": dg.MetadataValue.text(f"ptf run --seeds {out}"),
        }
    )
