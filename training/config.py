"""What a training run is asked to do. Each field's help text is what ``ptf train --help`` shows."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

__all__ = ["TrainConfig", "help_for"]


def _f(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass
class TrainConfig:
    kind: Literal["sft", "dpo", "grpo"] = _f(
        "sft", "sft (messages), dpo (prompt/chosen/rejected) or grpo (rl prompts, verifier rewards)"
    )
    dataset: str = _f("sft@latest", "the dataset version to train on, NAME@VERSION (v3, latest, or an alias)")
    model: str = _f("bundled", "a model folder, or 'bundled' (SmolLM2-135M-Instruct)")
    output: str = _f("", "where the model, tokenizer and ptf_lineage.json go")
    max_steps: int = _f(20, "optimizer steps")
    learning_rate: float = _f(5e-5, "peak learning rate (linear decay)")
    batch_size: int = _f(4, "examples per device per step")
    grad_accum: int = _f(1, "gradient accumulation steps")
    max_length: int = _f(1024, "tokens per example (longer ones are truncated)")
    beta: float = _f(0.1, "DPO: strength of the KL anchor to the reference model")
    seed: int = _f(0, "seed for shuffling and initialisation")
    bf16: bool = _f(False, "train in bfloat16 (GPUs; on CPU float32 is faster)")
    eval_loss: bool = _f(True, "measure loss on the training and validation splits before and after")
    save_checkpoints: bool = _f(False, "also keep intermediate checkpoints (every max_steps/2)")
    train_layers: int = _f(
        0, "train only the last N decoder layers and the final norm (0: every weight); short CPU runs"
    )
    num_generations: int = _f(4, "GRPO: completions sampled per prompt (the group the advantage compares)")
    max_completion_length: int = _f(128, "GRPO: tokens per sampled completion")
    temperature: float = _f(0.9, "GRPO: sampling temperature of the completions")
    kl: float = _f(0.0, "GRPO: KL penalty to the reference model (0: no reference model, TRL's default)")
    format_weight: float = _f(0.2, "GRPO: weight of the format reward (the verifiers' rewards weigh 1)")
    save_every: int = _f(0, "GRPO: checkpoint every N steps (0: every max_steps/10); a killed run resumes")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def help_for(name: str) -> str:
    for item in fields(TrainConfig):
        if item.name == name:
            return str(item.metadata["help"])
    raise KeyError(name)
