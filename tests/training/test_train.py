"""The bundled trainer, for real on CPU: SFT and DPO steps on published versions of the tiny model."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

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


# The rule the quality check trains on: each word has a code word, a prompt names two words, and
# the answer is their two codes. Each word is one token of the tiny model's tokenizer (its corpus
# is in tests/models.py), so a row is ~30 tokens. The 24 validation pairs are never trained on,
# but each of their words is, in both positions, so only a model that learned the rule predicts them.
_CODES = {
    "fox": "brown",
    "dog": "capital",
    "judge": "dedup",
    "shard": "france",
    "paris": "function",
    "python": "jumps",
    "sandbox": "numbers",
    "version": "over",
    "prompt": "quick",
    "sample": "returns",
    "factory": "sum",
    "lazy": "answer",
}


def _code_rows(pairs: list[tuple[str, str]]) -> pa.Table:
    records = []
    for prompt, answer in pairs:
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
        records.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": "b1",
                "kind": "sft",
                "messages": messages,
                "provenance": {"method": "test"},
                "decisions": [{"stage": "seed", "verdict": "keep", "reason": "test", "detail": None}],
            }
        )
    return from_records(records)


def _code_splits(shuffle_answers: bool) -> dict[str, pa.Table]:
    """``train`` (120 pairs) and ``validation`` (24 held-out pairs, always with their right answers)."""
    pairs = [(f"codes of {a} {b}?", f"{_CODES[a]} {_CODES[b]}") for a, b in itertools.product(_CODES, _CODES)]
    random.Random(0).shuffle(pairs)
    validation, train = pairs[:24], pairs[24:]
    if shuffle_answers:  # the control: the same prompts and answers, but no rule joins them
        answers = [answer for _, answer in train]
        random.Random(1).shuffle(answers)
        train = [(prompt, answer) for (prompt, _), answer in zip(train, answers, strict=True)]
    return {"train": _code_rows(train), "validation": _code_rows(validation)}


def _answered(output: Path, validation: pa.Table) -> int:
    """How many held-out prompts the checkpoint answers exactly: greedy, through the chat template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(output)
    model = AutoModelForCausalLM.from_pretrained(output)
    right = 0
    for row in validation.to_pylist():
        prompt, answer = row["messages"]
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt["content"]}], tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer(text, return_tensors="pt").input_ids
        generated = model.generate(ids, max_new_tokens=8, do_sample=False)
        reply = tokenizer.decode(generated[0, ids.shape[1] :], skip_special_tokens=True).strip()
        right += reply == answer["content"]
    return right


@pytest.mark.slow  # two 400-step runs: ~30 s of CPU
def test_sft_learns_a_rule_that_a_shuffled_control_cannot(
    home: Path, tiny_model: Path, tmp_path: Path
) -> None:
    """Validation loss and held-out answers after SFT on the rule, against a shuffled-answer control.

    Both runs have the same model, seed, steps and hyper-parameters and are measured on the same
    held-out rows; only the control's training answers are permuted across its prompts. Fitting the
    chat template and how often each word occurs lowers both runs' losses alike (from ~5.9); only
    learning the answer from the prompt (answers kept with their prompts, loss on the answers)
    lowers the rule run's validation loss further. Measured over seeds 0-3: rule 0.186-0.206,
    control 0.377-0.385 nats/token (gap 0.179-0.193); a control shuffled another way lands within
    0.006 of this one. The loss is TRL's own, so a bug in its preprocessing that both runs share
    (labels shifted one token too far, no chat template) leaves the gap; greedy answers to the
    held-out prompts, generated here through the tokenizer's chat template, catch those: the rule
    run got 18-24 of 24 right over seeds 0-3, the control 0, and either of those bugs 0.
    """
    datasets = DatasetStore(str(home))
    losses: dict[str, dict[str, Any]] = {}
    right: dict[str, int] = {}
    for name, shuffle_answers in (("rule", False), ("control", True)):
        splits = _code_splits(shuffle_answers)
        datasets.publish(name, splits, kind="sft", config_hash="t")
        config = TrainConfig(
            kind="sft",
            dataset=f"{name}@v1",
            model=str(tiny_model),
            output=str(tmp_path / name),
            max_steps=400,
            learning_rate=5e-3,
            batch_size=8,
            max_length=64,
        )
        losses[name] = train(config, datasets, say=lambda _: None).metrics
        right[name] = _answered(tmp_path / name, splits["validation"])
    rule, control = losses["rule"], losses["control"]
    assert rule["validation_loss_before"] == pytest.approx(control["validation_loss_before"])
    gap = control["validation_loss_after"] - rule["validation_loss_after"]
    assert gap > 0.1, (
        f"validation loss after SFT: {rule['validation_loss_after']:.3f} on the rule, "
        f"{control['validation_loss_after']:.3f} on shuffled answers; the rule was not learned"
    )
    assert right["rule"] >= 12, f"the rule run answered {right['rule']} of 24 held-out prompts right"
    assert right["control"] <= 3, f"the control answered {right['control']} of 24 right: the check is vacuous"


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
    # a smoke check (memorising guarantees it): test_sft_learns_a_rule_that_a_shuffled_control_cannot
    # is the one that fails when the answers are not learned from their prompts
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

    from ptfactory.assets.resources import factory_resources
    from ptfactory.pipelines.definitions import defs

    job = defs.resolve_job_def("train_sft")
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            instance=instance,
            resources=factory_resources(str(tmp_path / "none.yaml"), str(home)),
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


def test_train_layers_trains_only_the_last_layers(
    published: DatasetStore, tiny_model: Path, tmp_path: Path
) -> None:
    before = _weights(tiny_model)
    config = TrainConfig(
        kind="sft",
        dataset="sft@v1",
        model=str(tiny_model),
        output=str(tmp_path / "top"),
        max_steps=2,
        learning_rate=5e-3,
        batch_size=8,
        max_length=128,
        eval_loss=False,
        train_layers=1,
    )
    train(config, published, say=lambda _: None)
    after = _weights(tmp_path / "top")
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved and all(k.startswith(("model.layers.1.", "model.norm.")) for k in moved), sorted(moved)
