"""Evaluation as a step of the ``train_sft`` job: the checkpoint it trained is evaluated on the
version's verifiable validation rows, the report is stored beside the checkpoint and linked in
lineage (checkpoint <- version <- batches): ``ptf datasets show`` and ``ptf lineage`` list it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pyarrow as pa

from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.lineage import evaluations_of, lineage
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.versions import DatasetStore


def _verifiable(count: int) -> dict[str, pa.Table]:
    def rows(start: int, stop: int, batch: str) -> pa.Table:
        records = []
        for i in range(start, stop):
            messages = [
                {"role": "user", "content": f"What is {i} plus {i}?"},
                {"role": "assistant", "content": f"#### {2 * i}"},
            ]
            records.append(
                {
                    "sample_id": sample_id("sft", messages),
                    "batch": batch,
                    "kind": "sft",
                    "messages": messages,
                    "reference": {"answer": str(2 * i), "source": "answer"},
                    "decisions": [{"stage": "seed", "verdict": "keep", "reason": "test", "detail": None}],
                }
            )
        return from_records(records)

    return {"train": rows(0, count, "b1"), "validation": rows(count, count + 4, "b2")}


def test_train_then_evaluate_links_the_report_to_the_version(
    home: Path,
    tiny_model: Path,
    tmp_path: Path,
    project: Path,
    ptf: Callable[..., CompletedProcess[str]],
) -> None:
    import dagster as dg

    from ptfactory.assets.resources import factory_resources
    from ptfactory.pipelines.definitions import defs

    datasets = DatasetStore(str(home))
    datasets.publish("sft", _verifiable(12), kind="sft", config_hash="t", batches=["b1", "b2"])
    job = defs.resolve_job_def("train_sft")
    config = tmp_path / "factory.yaml"  # the evaluation step samples as factory.yaml's eval says
    config.write_text("eval:\n  rollouts: 2\n")
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            instance=instance,
            resources=factory_resources(str(config), str(home)),
            run_config={
                "ops": {
                    "train_sft_op": {
                        "config": {
                            "dataset": "sft@v1",
                            "model": str(tiny_model),
                            "max_steps": 2,
                            "max_length": 64,
                        }
                    },
                    "evaluate_checkpoint_op": {"config": {"max_tokens": 8}},
                }
            },
        )
    assert result.success
    checkpoint = Path(result.output_for_node("train_sft_op"))
    report_path = Path(result.output_for_node("evaluate_checkpoint_op"))
    assert report_path.parent == checkpoint / "evals"  # stored beside the checkpoint
    report = json.loads(report_path.read_text())
    assert report["tasks"] == ["sft@v1:validation"]
    assert [r["family"] for r in report["results"]] == ["answer"] * 4
    assert [r["rollouts"] for r in report["results"]] == [2] * 4  # eval.rollouts; max_tokens the op's
    assert report["lineage"]["checkpoint"] == str(checkpoint)
    assert report["lineage"]["ref"] == "sft@v1" and report["lineage"]["batches"] == ["b1", "b2"]
    assert (
        report["lineage"]["training_run_id"]
        == json.loads((checkpoint / "ptf_lineage.json").read_text())["run_id"]
    )

    listed = evaluations_of(datasets, "sft", 1)
    assert [e["run_id"] for e in listed] == [report["run_id"]]
    trained_row = _verifiable(12)["train"].column("sample_id")[0].as_py()
    story = lineage(trained_row, datasets, AssetStore(str(home)))
    assert [e["run_id"] for e in story["evaluations"]] == [report["run_id"]]

    shown = ptf("datasets", "show", "sft@v1", "--json", env={"PTF_HOME": str(home)})
    assert shown.returncode == 0, shown.stderr
    assert [e["run_id"] for e in json.loads(shown.stdout)["evaluations"]] == [report["run_id"]]
    told = ptf("lineage", trained_row, env={"PTF_HOME": str(home)})
    assert told.returncode == 0 and report["run_id"][:12] in told.stdout, told.stdout
