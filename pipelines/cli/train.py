"""``ptf train``: TRL SFT / DPO on a pinned dataset version."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ptfactory.pipelines.cli._app import app, config_path, err, out, print_json, user_path
from ptfactory.training.config import TrainConfig, help_for


@app.command()
def train(
    kind: Annotated[str, typer.Argument(help="sft, dpo or grpo", metavar="sft|dpo|grpo")],
    dataset: Annotated[
        str | None,
        typer.Option(help="NAME@VERSION to train on; default: sft@latest / preference@latest / rl@latest"),
    ] = None,
    model: Annotated[
        str, typer.Option(help="a model folder, or 'bundled' (SmolLM2-135M-Instruct)")
    ] = "bundled",
    output: Annotated[Path | None, typer.Option(help="where the model and ptf_lineage.json go")] = None,
    max_steps: Annotated[int, typer.Option(help="optimizer steps")] = 20,
    learning_rate: Annotated[float, typer.Option(help="peak learning rate (linear decay)")] = 5e-5,
    batch_size: Annotated[int, typer.Option(help="examples per device per step")] = 4,
    grad_accum: Annotated[int, typer.Option(help="gradient accumulation steps")] = 1,
    max_length: Annotated[int, typer.Option(help="tokens per example (longer ones are truncated)")] = 1024,
    beta: Annotated[float, typer.Option(help="DPO: strength of the KL anchor to the reference model")] = 0.1,
    seed: Annotated[int, typer.Option(help="seed for shuffling and initialisation")] = 0,
    bf16: Annotated[bool, typer.Option("--bf16", help="train in bfloat16 (GPUs)")] = False,
    eval_loss: Annotated[
        bool, typer.Option("--eval-loss/--no-eval-loss", help="loss on train/validation before and after")
    ] = True,
    train_layers: Annotated[int, typer.Option(min=0, help=help_for("train_layers"))] = 0,
    num_generations: Annotated[int, typer.Option(min=2, help=help_for("num_generations"))] = 4,
    max_completion_length: Annotated[int, typer.Option(min=1, help=help_for("max_completion_length"))] = 128,
    temperature: Annotated[float, typer.Option(min=0.0, help=help_for("temperature"))] = 0.9,
    kl: Annotated[float, typer.Option(min=0.0, help=help_for("kl"))] = 0.0,
    format_weight: Annotated[float, typer.Option(min=0.0, help=help_for("format_weight"))] = 0.2,
    save_every: Annotated[int, typer.Option(min=0, help=help_for("save_every"))] = 0,
    config_file: Annotated[
        Path, typer.Option("--config", help="factory.yaml (grpo: the sandbox code rewards run in)")
    ] = Path("factory.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print the lineage as JSON")] = False,
) -> None:
    """Train with TRL (SFTTrainer / DPOTrainer / GRPOTrainer) on a pinned dataset version, sha256-verified first.

    Writes the model, tokenizer and ptf_lineage.json (dataset, version, manifest sha256, config,
    metrics) to --output and records the run in the catalog (`ptf datasets show NAME@VERSION`).
    grpo: an rl version's prompts, rewarded by the factory's verifiers (code in the sandbox,
    answers with math-verify, reasoning-gym scorers) plus a format reward; checkpoints every
    --save-every steps, and the same command after a crash or `kill -9` resumes from the last.
    On GPUs: --bf16, and `accelerate launch --config_file training/accelerate/ddp.yaml -m ptfactory
    train ...` for several (see docs/training.md).

    Examples: `ptf train sft --dataset sft@v3 --output runs/sft-v3 --max-steps 100`;
    `ptf train grpo --dataset rl@v2 --output runs/grpo-v2 --max-steps 200`
    """
    from ptfactory.training.run import train as run_training

    if kind not in ("sft", "dpo", "grpo"):
        raise typer.BadParameter(
            f"{kind!r} is not a kind of training; use sft, dpo or grpo", param_hint="KIND"
        )
    if output is None:
        raise typer.BadParameter("where should the model go? pass --output DIR", param_hint="--output")
    config = TrainConfig(
        kind=kind,  # type: ignore[arg-type]
        dataset=dataset or {"sft": "sft@latest", "dpo": "preference@latest"}.get(kind, "rl@latest"),
        model=model,
        output=str(user_path(output)),
        max_steps=max_steps,
        learning_rate=learning_rate,
        batch_size=batch_size,
        grad_accum=grad_accum,
        max_length=max_length,
        beta=beta,
        seed=seed,
        bf16=bf16,
        eval_loss=eval_loss,
        train_layers=train_layers,
        num_generations=num_generations,
        max_completion_length=max_completion_length,
        temperature=temperature,
        kl=kl,
        format_weight=format_weight,
        save_every=save_every,
    )
    if kind == "grpo":
        _grpo(config, config_path(config_file), as_json)
        return
    result = run_training(config, say=lambda line: err.print(line, highlight=False))
    if as_json:
        print_json(result.lineage)
        return
    m = result.metrics
    loss = (
        f"train loss {m['train_loss_before']:.4f} -> {m['train_loss_after']:.4f}"
        if "train_loss_before" in m and "train_loss_after" in m
        else f"mean train loss {m['train_loss_mean']:.4f}"
    )
    out.print(
        f"{config.kind}: {m['steps']} steps in {m['train_runtime_s']:.1f} s ({m['steps_per_s']:.2f} steps/s); {loss}"
    )
    out.print(f"  model and ptf_lineage.json in {result.output}")


def _grpo(config: TrainConfig, factory_yaml: Path, as_json: bool) -> None:
    from ptfactory.config import load_config
    from ptfactory.training.grpo import train_grpo

    box = load_config(factory_yaml).sandbox
    result = train_grpo(
        config,
        say=lambda line: err.print(line, highlight=False, soft_wrap=True),
        sandbox=(box.limits(), box.workers, box.backend),
    )
    if as_json:
        print_json(result.lineage)
        return
    m = result.metrics
    for point in m["reward_per_step"]:
        out.print(f"step {point['step']:>4}  mean reward {point['reward']:.3f}")
    resumed = f" (resumed from {m['resumed_from']})" if m.get("resumed_from") else ""
    out.print(f"grpo: {m['steps']} steps in {m['train_runtime_s']:.1f} s{resumed}")
    out.print(f"  model and ptf_lineage.json in {result.output}")
