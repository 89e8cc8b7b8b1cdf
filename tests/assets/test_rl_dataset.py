"""``rl_dataset`` through Dagster: curated verifiable rows get the student's pass rate (measured by
the real verifiers, kept between runs), the band keeps the prompt solved sometimes and leaves out
the ones solved always and never, and the version is published, audited and pulled as ``rl``.

The student is a scripted engine (tests/training/scripted.py): what is under test is the factory's
path (measurement, band, publish), not the model; a real model's pass rate on a prompt cannot be
pinned to "always", "never" and "sometimes" by a test. Everything else is real: the Dagster
instance, the resources, the verifiers, the dataset store and its audit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from ptfactory.assets.resources import factory_resources
from ptfactory.assets.resources.engines import EnginesResource
from ptfactory.assets.rl import MEASURED_ASSET, rl_dataset
from ptfactory.engines.base import Engine
from ptfactory.engines.spec import EngineSpec
from ptfactory.generators.procedural import draw_seed_rows
from ptfactory.generators.seeds import parse_seed
from ptfactory.pipelines.annotate import _failed
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.pull import pull
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.schema.review import ROUTE_STAGE
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.eval.tasks import load_tasks
from tests.training.scripted import ScriptedEngine


class _ScriptedStudent(EnginesResource):
    """The factory's engines, with a scripted student that counts the attempts asked of it."""

    script: dict[str, list[str]]

    def engine(self, role: str, spec: EngineSpec | None = None) -> Engine:
        if role != "student":
            return super().engine(role, spec)
        engine = ScriptedEngine(model_id="scripted", script=self.script)
        _BUILT.append(engine)
        return engine


_BUILT: list[ScriptedEngine] = []


def _curated() -> tuple[pa.Table, dict[str, list[str]]]:
    """Three procedural prompts that passed the gates (each with a generated answer), and a script:
    the first always answered right, the second never, the third right one time in two; a fourth
    routed to an expert and not decided yet (not in the script: the student is never asked)."""
    rows, script = [], {}
    for seed, answers in zip(
        draw_seed_rows(["chain_sum"], 4, seed=0),
        [["{a}"], ["0"], ["{a}", "1"], None],
        strict=True,
    ):
        task = parse_seed(seed["id"], seed)
        reference = task.reference()
        messages = [
            {"role": "user", "content": task.prompt},
            {"role": "assistant", "content": f"<answer>{reference['answer']}</answer>"},
        ]
        rows.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": "b1",
                "kind": "sft",
                "messages": messages,
                "reference": reference,
                "decisions": [
                    {
                        "stage": ROUTE_STAGE,
                        "verdict": "keep" if answers else "route",
                        "reason": "t",
                        "detail": None,
                    }
                ],
            }
        )
        if answers is None:
            continue
        phrase = task.prompt.split("problem: ")[1].split(" =")[0]
        script[phrase] = [f"<answer>{a.format(a=reference['answer'])}</answer>" for a in answers]
    return from_records(rows), script


def _materialize(home: Path, config: Path, script: dict[str, list[str]]) -> dg.ExecuteInProcessResult:
    resources: dict[str, Any] = factory_resources(str(config), str(home))
    resources["engines"] = _ScriptedStudent(settings=resources["settings"], script=script)
    del resources["panel"]  # built over the factory's engines; rl_dataset asks no judge
    return dg.materialize(
        [dg.SourceAsset("curated_samples", io_manager_key="samples_io"), rl_dataset],
        instance=dg.DagsterInstance.ephemeral(),
        resources=resources,
        raise_on_error=False,
    )


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    (event,) = result.get_asset_materialization_events()
    materialization = event.materialization
    return {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}


def test_rl_dataset_publishes_the_prompts_solved_sometimes(home: Path, tmp_path: Path) -> None:
    curated, script = _curated()
    AssetStore(str(home)).write("curated_samples", curated)
    config = tmp_path / "factory.yaml"
    config.write_text("datasets: {validation_fraction: 0}\n")
    _BUILT.clear()

    result = _materialize(home, config, script)
    assert result.success, _failed(result)
    metadata = _metadata(result)
    assert metadata["prompts_measured"] == 3 and metadata["student_attempts"] == 12
    assert metadata["engine"] == "scripted:scripted" and metadata["completion_tokens"] > 0  # the cost
    assert all(
        f"| {why} | 1 |" in metadata["left_out"] for why in ("too_easy", "too_hard", "awaiting_review")
    )
    assert all(c.passed for c in result.get_asset_check_evaluations())

    store = DatasetStore(str(home))
    manifest = store.resolve("rl@v1")
    assert manifest.kind == "rl" and manifest.rows == 1
    (row,) = store.read("rl@v1").to_pylist()
    sometimes = curated.to_pylist()[2]["messages"][0]["content"]
    assert row["kind"] == "rl" and [(m["role"], m["content"]) for m in row["messages"]] == [
        ("user", sometimes)
    ]
    assert row["reference"]["family"] == "chain_sum"
    detail = json.loads(row["decisions"][-1]["detail"])
    assert detail["pass_rate"] == 0.5 and detail["k"] == 4 and detail["band"] == [0.0, 1.0]
    assert manifest.stats["rl"]["max_prompts"] == 8
    receipt = pull(store, "rl@v1", tmp_path / "pulled")
    assert receipt.manifest.kind == "rl"
    (task,) = load_tasks("rl@v1", store)  # what `ptf eval --tasks rl@v1` evaluates on
    assert task.kind == "procedural" and task.prompt[-1]["content"] == sometimes

    # the measurements were kept: a second run asks the student nothing and publishes nothing new
    assert AssetStore(str(home)).read(MEASURED_ASSET).num_rows == 3
    calls = sum(e.stats.requests_sent for e in _BUILT)
    again = _materialize(home, config, script)
    assert again.success, _failed(again)
    metadata = _metadata(again)
    assert metadata["prompts_measured"] == 0 and metadata["prompts_reused"] == 3 and "engine" not in metadata
    assert metadata["created"] is False and store.versions("rl") == [1]
    assert sum(e.stats.requests_sent for e in _BUILT) == calls

    # an expert accepts the fourth row: only it is measured, and rl@v2 is published as a change
    rows = curated.to_pylist()
    decided = {"stage": "review", "verdict": "keep", "reason": "accepted", "detail": None}
    rows[3]["decisions"] = [*rows[3]["decisions"], decided]
    AssetStore(str(home)).write("curated_samples", from_records(rows))
    prompt = rows[3]["messages"][0]["content"]
    answer = rows[3]["reference"]["answer"]
    script[prompt.split("problem: ")[1].split(" =")[0]] = [f"<answer>{answer}</answer>", "<answer>x</answer>"]
    third = _materialize(home, config, script)
    assert third.success, _failed(third)
    metadata = _metadata(third)
    assert metadata["prompts_measured"] == 1 and metadata["prompts_reused"] == 3
    assert metadata["version"] == "rl@v2" and metadata["publish"].startswith("delta")
    assert {r["messages"][0]["content"] for r in store.read("rl@v2").to_pylist()} == {sometimes, prompt}


def test_the_runs_budget_stops_the_students_attempts(home: Path, tmp_path: Path) -> None:
    """Measuring is metered like every stage: at a spent budget (tokens 0: only the cache answers)
    nothing is asked, nothing measured is published, and the run says which limit stopped it."""
    curated, script = _curated()
    AssetStore(str(home)).write("curated_samples", curated)
    config = tmp_path / "factory.yaml"
    config.write_text("budget: {tokens: 0}\n")
    _BUILT.clear()
    result = _materialize(home, config, script)
    assert result.success, _failed(result)
    metadata = _metadata(result)
    assert metadata["prompts_measured"] == 0 and "tokens 0 of 0" in metadata["budget_stopped"]
    assert "| no_pass_rate | 3 |" in metadata["left_out"] and metadata["created"] is False
    assert sum(e.stats.requests_sent for e in _BUILT) == 0
    assert not AssetStore(str(home)).exists(MEASURED_ASSET)
