"""``train``: one SFT or DPO run over TRL on a pinned dataset version, with its lineage recorded.

The output folder gets the model, its tokenizer and ``ptf_lineage.json`` (dataset name, version,
manifest sha256, resolved config, library versions, metrics); the catalog's ``training_runs``
table gets the same, so ``ptf datasets show NAME@VERSION`` lists what was trained on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ptfactory import code_version
from ptfactory.errors import UserInputError
from ptfactory.storage.fs import atomic_write_text
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.config import TrainConfig
from ptfactory.training.data import TrainingData, load_training_data

__all__ = ["LINEAGE_FILE", "TrainResult", "freeze_below", "record_run", "train"]

LINEAGE_FILE = "ptf_lineage.json"


@dataclass
class TrainResult:
    run_id: str
    output: Path
    metrics: dict[str, Any] = field(default_factory=dict)
    lineage: dict[str, Any] = field(default_factory=dict)


def _versions() -> dict[str, str]:
    import torch
    import transformers
    import trl

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "ptfactory": code_version(),
        "python": platform.python_version(),
    }


def freeze_below(model: Any, layers: int) -> None:
    """Train only the last ``layers`` decoder layers and the final norm (0: leave every weight
    trainable). Below them the forward pass builds no graph and the backward pass stops early: on
    two CPU cores a step of the 135M model costs about a third of a full one."""
    if layers <= 0:
        return
    base = getattr(model, "model", None)
    blocks = getattr(base, "layers", None)
    if blocks is None:
        raise UserInputError(f"--train-layers: {type(model).__name__} has no decoder layers to pick from")
    if layers > len(blocks):
        raise UserInputError(f"--train-layers {layers}: the model has {len(blocks)} decoder layers")
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    for module in [*blocks[-layers:], getattr(base, "norm", None)]:
        for parameter in module.parameters() if module is not None else []:
            parameter.requires_grad_(True)


def _trainer(config: TrainConfig, data: TrainingData, model: Any, tokenizer: Any, output: Path) -> Any:
    import torch
    from datasets import Dataset

    common: dict[str, Any] = {
        "output_dir": str(output / "checkpoints"),
        "max_steps": config.max_steps,
        "learning_rate": config.learning_rate,
        "per_device_train_batch_size": config.batch_size,
        "per_device_eval_batch_size": config.batch_size,
        "gradient_accumulation_steps": config.grad_accum,
        "max_length": config.max_length,
        "seed": config.seed,
        "bf16": config.bf16,
        "logging_steps": 1,
        "report_to": [],
        "save_strategy": "steps" if config.save_checkpoints else "no",
        "save_steps": max(1, config.max_steps // 2),
        "use_cpu": not torch.cuda.is_available(),
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
    }
    train = Dataset.from_list(data.train)
    evaluate: dict[str, Any] | None = None
    if config.eval_loss:
        evaluate = {"train": train}
        if data.validation:
            evaluate["validation"] = Dataset.from_list(data.validation)
    if config.kind == "sft":
        from trl import SFTConfig, SFTTrainer  # type: ignore[attr-defined]

        return SFTTrainer(
            model=model,
            args=SFTConfig(**common),
            train_dataset=train,
            eval_dataset=evaluate,
            processing_class=tokenizer,
        )
    from trl import DPOConfig, DPOTrainer  # type: ignore[attr-defined]

    return DPOTrainer(
        model=model,
        args=DPOConfig(**common, beta=config.beta),
        train_dataset=train,
        eval_dataset=evaluate,
        processing_class=tokenizer,
    )


def _losses(trainer: Any, when: str) -> dict[str, float]:
    """Loss on the training and validation rows (no gradient step), via TRL's own preprocessing."""
    metrics = trainer.evaluate()
    return {
        f"{name.removeprefix('eval_').removesuffix('_loss')}_loss_{when}": float(value)
        for name, value in metrics.items()
        if name.endswith("_loss")
    }


def train(config: TrainConfig, datasets: DatasetStore | None = None, say: Any = print) -> TrainResult:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ptfactory.engines.bundled import resolve_model_path

    if not config.output:
        raise UserInputError("no output folder: pass --output DIR")
    if config.max_steps < 1:
        raise UserInputError(f"--max-steps is {config.max_steps}; it must be at least 1")
    datasets = datasets or DatasetStore()
    data = load_training_data(datasets, config.dataset, config.kind)
    model_path = resolve_model_path(config.model)
    if not Path(model_path).exists():
        raise UserInputError(f"no model folder at {model_path}; pass --model PATH or --model bundled")
    output = Path(config.output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    say(
        f"{config.kind} on {data.manifest.ref} ({len(data.train)} train / {len(data.validation)} validation rows), "
        f"model {config.model}, {config.max_steps} steps"
    )
    torch.manual_seed(config.seed)
    # a local folder (checked above): offline by argument, not by the process's environment
    tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.bfloat16 if config.bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, local_files_only=True)
    freeze_below(model, config.train_layers)
    trainer = _trainer(config, data, model, tokenizer, output)

    metrics: dict[str, Any] = {}
    # the trainer prints its logs; stdout is for results (`ptf train --json`)
    with contextlib.redirect_stdout(sys.stderr):
        if config.eval_loss:
            metrics.update(_losses(trainer, "before"))
        started = time.perf_counter()
        outcome = trainer.train()
        metrics["train_runtime_s"] = time.perf_counter() - started
        if config.eval_loss:
            metrics.update(_losses(trainer, "after"))
    metrics["steps"] = int(trainer.state.global_step)
    metrics["steps_per_s"] = (
        metrics["steps"] / metrics["train_runtime_s"] if metrics["train_runtime_s"] else None
    )
    metrics["train_loss_mean"] = float(outcome.training_loss)
    tokens = [log.get("num_tokens") for log in trainer.state.log_history if log.get("num_tokens") is not None]
    if tokens:
        metrics["tokens_per_s"] = float(tokens[-1]) / metrics["train_runtime_s"]
    trainer.save_model(str(output))
    tokenizer.save_pretrained(str(output))

    model_path_info = {"given": config.model, "path": model_path}
    lineage = record_run(config, data, model_path_info, metrics, output, datasets=datasets)
    return TrainResult(lineage.get("run_id", ""), output, metrics, lineage)


def record_run(
    config: TrainConfig,
    data: TrainingData,
    model: dict[str, Any],
    metrics: dict[str, Any],
    output: Path,
    *,
    datasets: DatasetStore,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``ptf_lineage.json`` in ``output`` and the catalog's ``training_runs`` row; under
    ``accelerate launch`` only rank 0 records (the others get ``{}``)."""
    if int(os.environ.get("RANK", "0")) != 0:
        return {}
    run_id = uuid.uuid4().hex
    manifest = data.manifest
    lineage = {
        "run_id": run_id,
        "kind": config.kind,
        "dataset": {
            "name": manifest.name,
            "version": manifest.version,
            "ref": manifest.ref,
            "manifest_sha256": data.manifest_sha256,
            "rows": {"train": len(data.train), "validation": len(data.validation)},
            "shards": [{"file": s.file, "sha256": s.sha256} for s in manifest.shards],
            "config_hash": manifest.config_hash,
            "batches": list(manifest.batches),
        },
        "model": model,
        "config": config.to_json(),
        **(extra or {}),
        "metrics": metrics,
        "versions": _versions(),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    atomic_write_text(output / LINEAGE_FILE, json.dumps(lineage, indent=2, default=str))
    datasets.catalog.execute(
        "INSERT INTO training_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id,
            config.kind,
            manifest.name,
            manifest.version,
            data.manifest_sha256,
            config.model,
            str(output),
            json.dumps(config.to_json()),
            json.dumps(metrics, default=str),
            lineage["created_at"],
        ],
    )
    return lineage
