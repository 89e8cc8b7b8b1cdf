"""The bundled trainer, for real on CPU: SFT and DPO steps on published versions of the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
import torch

from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.split import split_table
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.config import TrainConfig
from ptfactory.training.run import train
from tests.conftest import make_rows


def _preference_rows(count: int) -> pa.Table:
    records = []
    for i in range(count):
        prompt = [{"role": "user", "content": f"Is {i} even?"}]
        chosen = [{"role": "assistant", "content": "yes" if i % 2 == 0 else "no"}]
        rejected = [{"role": "assistant", "content": "no" if i % 2 == 0 else "yes"}]
        records.append(
            {
                "sample_id": sample_id("preference", prompt, chosen=chosen, rejected=rejected),
                "batch": "b1",
                "kind": "preference",
                "messages": prompt,
                "chosen": chosen,
                "rejected": rejected,
                "decisions": [{"stage": "review", "verdict": "accept", "reason": "test", "detail": None}],
            }
        )
    return from_records(records)


@pytest.fixture
def published(home: Path) -> DatasetStore:
    datasets = DatasetStore(str(home))
    datasets.publish("sft", split_table(make_rows(40), 0.2), kind="sft", config_hash="t")
    datasets.publish("preference", split_table(_preference_rows(24), 0.2), kind="preference", config_hash="t")
    return datasets


def _weights(path: Path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize(("kind", "ref"), [("sft", "sft@latest"), ("dpo", "preference@v1")])
def test_training_lowers_loss_changes_weights_records_lineage(
    kind: str, ref: str, published: DatasetStore, tiny_model: Path, tmp_path: Path
) -> None:
    before = _weights(tiny_model)
    output = tmp_path / kind
    config = TrainConfig(
        kind=kind,  # type: ignore[arg-type]
        dataset=ref,
        model=str(tiny_model),
        output=str(output),
        max_steps=12,
        learning_rate=5e-3,
        batch_size=8,
        max_length=128,
    )
    result = train(config, published, say=lambda _: None)
    metrics = result.metrics
    assert metrics["steps"] == 12
    assert metrics["train_loss_after"] < metrics["train_loss_before"]
    after = _weights(output)
    assert any(not torch.equal(before[k], after[k]) for k in before)

    lineage = json.loads((output / "ptf_lineage.json").read_text())
    manifest = published.resolve(ref)
    assert lineage["dataset"]["ref"] == manifest.ref
    assert len(lineage["dataset"]["manifest_sha256"]) == 64
    assert lineage["config"]["max_steps"] == 12
    runs = published.catalog.query("SELECT kind, dataset, version, manifest_sha256 FROM training_runs")
    assert runs == [(kind, manifest.name, manifest.version, lineage["dataset"]["manifest_sha256"])]

    # the checkpoint reloads and generates
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(output)
    model = AutoModelForCausalLM.from_pretrained(output)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Is 4 even?"}], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    generated = model.generate(ids, max_new_tokens=4, do_sample=False)
    assert generated.shape[1] > ids.shape[1]


def test_wrong_kind_of_dataset_is_a_clear_error(
    published: DatasetStore, tiny_model: Path, tmp_path: Path
) -> None:
    from ptfactory.errors import UserInputError

    config = TrainConfig(kind="dpo", dataset="sft@latest", model=str(tiny_model), output=str(tmp_path / "o"))
    with pytest.raises(UserInputError, match="is a sft dataset"):
        train(config, published, say=lambda _: None)


def test_train_sft_job_runs_from_dagster(
    published: DatasetStore, home: Path, tiny_model: Path, tmp_path: Path
) -> None:
    import dagster as dg

    from ptfactory.assets.resources import FactoryResource
    from ptfactory.pipelines.definitions import defs

    job = defs.resolve_job_def("train_sft")
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            instance=instance,
            resources={"factory": FactoryResource(config_path=str(tmp_path / "none.yaml"), home=str(home))},
            run_config={
                "ops": {
                    "train_sft_op": {
                        "config": {
                            "dataset": "sft@v1",
                            "model": str(tiny_model),
                            "max_steps": 2,
                            "max_length": 128,
                        }
                    }
                }
            },
        )
    assert result.success
    output = Path(result.output_for_node("train_sft_op"))
    assert (output / "ptf_lineage.json").exists()
    assert published.catalog.query("SELECT count(*) FROM training_runs WHERE dataset = 'sft'") == [(1,)]


@pytest.mark.slow
def test_a_few_sft_steps_on_the_bundled_smollm2(
    published: DatasetStore, smollm2: Path, tmp_path: Path
) -> None:
    config = TrainConfig(
        kind="sft",
        dataset="sft@v1",
        model=str(smollm2),
        output=str(tmp_path / "smol"),
        max_steps=3,
        learning_rate=1e-4,
        batch_size=4,
        max_length=128,
    )
    result = train(config, published, say=lambda _: None)
    assert result.metrics["steps"] == 3
    assert result.metrics["train_loss_after"] < result.metrics["train_loss_before"]


@pytest.mark.gpu
def test_fifty_sft_steps_on_one_gpu(published: DatasetStore, smollm2: Path, tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine")
    config = TrainConfig(
        kind="sft",
        dataset="sft@v1",
        model=str(smollm2),
        output=str(tmp_path / "gpu"),
        max_steps=50,
        learning_rate=1e-4,
        batch_size=8,
        max_length=256,
        bf16=True,
    )
    result = train(config, published, say=print)
    print(f"tokens/s: {result.metrics.get('tokens_per_s')}, steps/s: {result.metrics['steps_per_s']}")
    assert result.metrics["steps"] == 50
    assert result.metrics["train_loss_after"] < result.metrics["train_loss_before"]
