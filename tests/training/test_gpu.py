"""On one CUDA GPU (scripts/gpu-check.sh runs these): ``ptf eval`` with many rollouts through the
factory's engine on the GPU, and GRPO on the bundled model with the verifiers' rewards; skipped
where there is no CUDA (the only tests that may skip)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ptfactory.generators.procedural import draw_seed_rows
from ptfactory.generators.seeds import parse_seed
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.config import TrainConfig
from ptfactory.training.eval.config import EvalSection
from ptfactory.training.eval.evaluate import evaluate
from ptfactory.training.eval.model import resolve_model
from ptfactory.training.grpo import train_grpo


def _cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine")


@pytest.mark.gpu
def test_eval_with_many_rollouts_on_one_gpu(smollm2: Path, tmp_path: Path) -> None:
    _cuda()
    model = resolve_model(str(smollm2))
    assert model.spec.device == "cuda"
    result = evaluate(
        model,
        ["rg:chain_sum:64:seed=7"],
        EvalSection(rollouts=8, max_tokens=128),
        cache_path=None,
        out=tmp_path / "report.json",
    )
    overall = result.overall
    print(json.dumps({k: overall[k] for k in ("success_rate", "ci95", "pass_at_k", "stability")}))
    assert overall["tasks"] == 64 and overall["rollouts_per_task"] == 8
    assert set(overall["pass_at_k"]) == {"1", "2", "4", "8"}
    assert result.report["model"]["engine"]["device"].startswith("cuda")


@pytest.mark.gpu
def test_grpo_steps_on_one_gpu(home: Path, smollm2: Path, tmp_path: Path) -> None:
    _cuda()
    records = []
    for row in draw_seed_rows(["chain_sum"], 64, seed=11):
        task = parse_seed(row["id"], row)
        messages = [{"role": "user", "content": task.prompt}]
        records.append(
            {
                "sample_id": sample_id("rl", messages),
                "batch": "gpu",
                "kind": "rl",
                "messages": messages,
                "reference": task.reference(),
                "decisions": [{"stage": "rl", "verdict": "keep", "reason": "in_band", "detail": None}],
            }
        )
    datasets = DatasetStore(str(home))
    datasets.publish("rl", from_records(records), kind="rl", config_hash="gpu", batches=["gpu"])
    config = TrainConfig(
        kind="grpo",
        dataset="rl@v1",
        model=str(smollm2),
        output=str(tmp_path / "grpo"),
        max_steps=30,
        learning_rate=1e-5,
        batch_size=32,
        num_generations=8,
        max_completion_length=128,
        bf16=True,
    )
    result = train_grpo(config, datasets, say=print)
    curve = result.metrics["reward_per_step"]
    print("\n".join(f"step {p['step']}: mean reward {p['reward']:.3f}" for p in curve))
    assert result.metrics["steps"] == 30 and len(curve) == 30
