"""``ptf train grpo``: TRL's GRPOTrainer on an ``rl`` version, rewarded by the factory's verifiers.

    ptf train grpo --dataset rl@v2 --output runs/grpo-v2 --max-steps 200

Each step samples ``num_generations`` completions per prompt and scores them with the rewards the
version's tasks need (training/rewards.py: code in the sandbox, answers with math-verify,
reasoning-gym tasks with their scorers, IFEval constraints) plus the format reward, weighted
``[1, ..., format_weight]``. Checkpoints are written every ``save_every`` steps (default every
tenth of the run) under ``<output>/checkpoints``: ``kill -9`` the run and the same command resumes
from the last complete one. The output folder gets the model, its tokenizer and
``ptf_lineage.json``: the version (manifest sha256, batches), the reward config, the trainer
config and the reward per step; the catalog's ``training_runs`` gets the run.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ptfactory.errors import UserInputError
from ptfactory.filters.execution.limits import Limits
from ptfactory.storage.assemble import rl_verifier
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.checkpoints import check_same_run, last_checkpoint
from ptfactory.training.config import TrainConfig
from ptfactory.training.data import load_training_data
from ptfactory.training.rewards import default_rewards
from ptfactory.training.run import TrainResult, freeze_below, record_run

__all__ = ["SandboxSettings", "grpo_args", "train_grpo"]

SandboxSettings = tuple[Limits, int | None, str]  # limits, workers, backend: where code rewards run


def grpo_args(config: TrainConfig, output: Path, weights: list[float]) -> Any:
    """TRL's GRPOConfig for ``config`` (what the checkpoint records as the trainer config)."""
    import torch
    from trl import GRPOConfig  # type: ignore[attr-defined]

    if config.num_generations < 2:
        raise UserInputError(f"--num-generations is {config.num_generations}; GRPO compares at least 2")
    if (config.batch_size * config.grad_accum) % config.num_generations:
        raise UserInputError(
            f"--batch-size {config.batch_size} x --grad-accum {config.grad_accum} completions per step must be a "
            f"multiple of --num-generations {config.num_generations} (whole groups); e.g. --batch-size "
            f"{config.num_generations}"
        )
    every = config.save_every or max(1, config.max_steps // 10)
    return GRPOConfig(
        output_dir=str(output / "checkpoints"),
        max_steps=config.max_steps,
        learning_rate=config.learning_rate,
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        beta=config.kl,
        reward_weights=weights,
        seed=config.seed,
        bf16=config.bf16,
        logging_steps=1,
        save_strategy="steps",
        save_steps=every,
        save_total_limit=2,
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        disable_tqdm=True,
        remove_unused_columns=False,
        log_completions=False,
    )


def _reward_curve(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per logged step: the mean total reward and each function's mean."""
    curve = []
    for log in history:
        if "reward" in log and "step" in log:
            point = {"step": int(log["step"]), "reward": float(log["reward"])}
            point.update(
                {
                    k: float(v)
                    for k, v in log.items()
                    if k.startswith("rewards/") and k.endswith("/mean") and v is not None
                }
            )
            curve.append(point)
    return curve


def train_grpo(
    config: TrainConfig,
    datasets: DatasetStore | None = None,
    say: Callable[[str], None] = print,
    sandbox: SandboxSettings | None = None,
) -> TrainResult:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer  # type: ignore[attr-defined]

    from ptfactory.engines.bundled import resolve_model_path

    if not config.output:
        raise UserInputError("no output folder: pass --output DIR")
    if config.max_steps < 1:
        raise UserInputError(f"--max-steps is {config.max_steps}; it must be at least 1")
    datasets = datasets or DatasetStore()
    data = load_training_data(datasets, config.dataset, "grpo")
    kinds = {rl_verifier(json.loads(r["ptf_task"])) for r in data.train}
    if None in kinds:
        raise UserInputError(
            f"{data.manifest.ref} has rows no verifier can check: an rl row needs a reference or tests"
        )
    model_path = resolve_model_path(config.model)
    if not Path(model_path).exists():
        raise UserInputError(f"no model folder at {model_path}; pass --model PATH or --model bundled")
    output = Path(config.output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    resume = last_checkpoint(output / "checkpoints")
    check_same_run(output, {**config.to_json(), "dataset_sha256": data.manifest_sha256}, resume is not None)
    limits, workers, backend = sandbox or (Limits(), None, "auto")
    rewards = default_rewards({str(k) for k in kinds}, limits, workers, backend)
    weights = [config.format_weight if r.name == "format_reward" else 1.0 for r in rewards]
    args = grpo_args(config, output, weights)
    say(
        f"grpo on {data.manifest.ref} ({len(data.train)} prompts; rewards {', '.join(r.name for r in rewards)}), "
        f"model {config.model}, {config.max_steps} steps"
        + (f"; resuming from {resume.name}" if resume else "")
    )
    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.bfloat16 if config.bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, local_files_only=True)
    freeze_below(model, config.train_layers)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=rewards,
        args=args,
        train_dataset=Dataset.from_list(data.train),
        processing_class=tokenizer,
    )
    metrics: dict[str, Any] = {}
    try:
        with contextlib.redirect_stdout(sys.stderr):
            started = time.perf_counter()
            trainer.train(resume_from_checkpoint=str(resume) if resume else None)
            metrics["train_runtime_s"] = time.perf_counter() - started
    finally:
        for reward in rewards:
            reward.close()
    curve = _reward_curve(trainer.state.log_history)
    metrics.update(
        steps=int(trainer.state.global_step),
        resumed_from=resume.name if resume else None,
        reward_per_step=curve,
        reward_first=curve[0]["reward"] if curve else None,
        reward_last=curve[-1]["reward"] if curve else None,
    )
    trainer.save_model(str(output))
    tokenizer.save_pretrained(str(output))
    trainer_config = {
        k: v for k, v in args.to_dict().items() if isinstance(v, str | int | float | bool | list | type(None))
    }
    reward_config = {"functions": [r.config() for r in rewards], "weights": weights}
    lineage = record_run(
        config,
        data,
        {"given": config.model, "path": model_path},
        metrics,
        output,
        datasets=datasets,
        extra={"rewards": reward_config, "trainer": {"name": "trl.GRPOTrainer", "args": trainer_config}},
    )
    return TrainResult(lineage.get("run_id", ""), output, metrics, lineage)
