"""``failure_seeds`` through Dagster: the newest recorded evaluation's failures become a seed file
whose ids carry the eval run; benchmark tasks never do; without an evaluation it says what to run.

The evaluated model is a scripted engine (the report is the input here; ``ptf eval`` on real models:
tests/training/test_eval_cli.py); the tasks, verifiers, catalog, decontamination index and Dagster
are real."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from ptfactory.assets.failures import failure_seeds_asset
from ptfactory.assets.resources import factory_resources
from ptfactory.engines.spec import EngineSpec
from ptfactory.pipelines.definitions import defs
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.eval.config import EvalSection
from ptfactory.training.eval.evaluate import evaluate, record_evaluation
from ptfactory.training.eval.model import EvalModel
from tests.training.scripted import ScriptedEngine


def _materialize(home: Path, config: Path, report: str = "") -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [failure_seeds_asset],
        instance=dg.DagsterInstance.ephemeral(),
        resources=factory_resources(str(config), str(home)),
        run_config={"ops": {"failure_seeds": {"config": {"report": report}}}},
        raise_on_error=False,
    )


def test_the_newest_evaluations_failures_become_seeds(home: Path, tmp_path: Path, tiny_model: Path) -> None:
    config = tmp_path / "factory.yaml"
    config.write_text(f"engines:\n  generator: {{model: {tiny_model}}}\n")
    missing = _materialize(home, config)
    assert not missing.success
    assert "no evaluation recorded yet" in str(missing.all_events), "the error says what to run"

    # chain_sum-0-0 answered wrong, chain_sum-0-1 right; the GSM8K item wrong but never a seed
    engine = ScriptedEngine(
        model_id="scripted",
        script={
            "1663 - 5242": ["<answer>0</answer>"],
            "4 - 1 - 7": ["<answer>-4</answer>"],
            "": ["#### 0"],
        },
    )
    model = EvalModel("scripted", EngineSpec(backend="openai", model="scripted"))
    result = evaluate(
        model,
        ["rg:chain_sum:2", "gsm8k:1"],
        EvalSection(),
        engine=engine,
        datasets=DatasetStore(str(home)),
        out=tmp_path / "report.json",
    )
    assert {r["id"]: r["successes"] for r in result.report["results"]}["chain_sum-0-0"] == 0

    done = _materialize(home, config, str(tmp_path / "report.json"))
    assert done.success
    (event,) = done.get_asset_materialization_events()
    meta = {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}
    assert meta["eval_run_id"] == result.run_id and meta["report"] == str(tmp_path / "report.json")
    assert "benchmark_task" in meta["left_out"]
    path = Path(meta["path"])
    assert path.parent == home / "failure-seeds"
    seeds = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(seeds) == meta["seeds"] == 2  # two new chain_sum instances for the one failed task
    assert all(s["id"].startswith(f"eval-{result.run_id[:12]}:chain_sum-0-0:") for s in seeds)
    provenance = json.loads(path.with_name(path.stem + ".provenance.json").read_text())
    assert provenance["eval_run_id"] == result.run_id
    assert meta["next"] == f"ptf run --seeds {path}"

    # no report named: the newest evaluation of a checkpoint the catalog records (the train job's step)
    record_evaluation(DatasetStore(str(home)), result.report, tmp_path / "report.json")
    newest = _materialize(home, config)
    assert newest.success
    (event,) = newest.get_asset_materialization_events()
    assert event.materialization.metadata["eval_run_id"].value == result.run_id

    # follows an evaluation, not a batch: never part of `ptf run`
    factory = defs.resolve_job_def("factory").asset_layer.executable_asset_keys
    assert dg.AssetKey("failure_seeds") not in factory and dg.AssetKey("rl_dataset") in factory
