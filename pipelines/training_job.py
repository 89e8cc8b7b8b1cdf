"""``train_sft``: launch a training run from the Dagster UI (Launchpad), recorded like any run.

The job is train then evaluate: ``evaluate_checkpoint_op`` runs ``ptf eval``'s library on the
checkpoint the training op wrote (default tasks: the trained version's verifiable validation rows),
stores the report beside the checkpoint and records it in the catalog, so ``ptf datasets show``
lists it under the version. Evaluation is a step of this job, not an asset: a checkpoint is a run's
output, not a partition of the factory's data.
"""

import dagster as dg
from pydantic import Field

from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.training.config import TrainConfig, help_for
from ptfactory.training.run import train


class TrainSftConfig(dg.Config):
    dataset: str = Field("sft@latest", description=help_for("dataset"))
    model: str = Field("bundled", description=help_for("model"))
    max_steps: int = Field(20, description=help_for("max_steps"))
    output: str = Field("", description="output folder; default: <state>/trained/<dagster run id>")
    learning_rate: float = Field(5e-5, description=help_for("learning_rate"))
    batch_size: int = Field(4, description=help_for("batch_size"))
    max_length: int = Field(1024, description=help_for("max_length"))
    bf16: bool = Field(False, description=help_for("bf16"))


@dg.op(description="SFT over TRL on a pinned dataset version; lineage to ptf_lineage.json and the catalog.")
def train_sft_op(
    context: dg.OpExecutionContext, config: TrainSftConfig, settings: SettingsResource
) -> dg.Output[str]:
    output = config.output or str(settings.state_dir / "trained" / context.run_id)
    result = train(
        TrainConfig(
            kind="sft",
            dataset=config.dataset,
            model=config.model,
            output=output,
            max_steps=config.max_steps,
            learning_rate=config.learning_rate,
            batch_size=config.batch_size,
            max_length=config.max_length,
            bf16=config.bf16,
        ),
        settings.datasets(),
        say=context.log.info,
    )
    metadata: dict[str, dg.RawMetadataValue] = {
        "dataset": result.lineage["dataset"]["ref"],
        "manifest_sha256": result.lineage["dataset"]["manifest_sha256"],
        "output": dg.MetadataValue.path(str(result.output)),
        "training_run_id": result.run_id,
    }
    metadata.update({k: float(v) for k, v in result.metrics.items() if isinstance(v, int | float)})
    return dg.Output(str(result.output), metadata=metadata)


class EvaluateConfig(dg.Config):
    tasks: list[str] = Field(
        default_factory=list,
        description="task specs as `ptf eval --tasks` takes them; empty: the trained version's validation "
        "split (skipped, with a note, when none of its rows can be verified)",
    )
    # unset: factory.yaml's eval section (as `ptf eval` reads it); set: this run's value
    rollouts: int | None = Field(
        None, ge=1, description="answers per task; default: factory.yaml's eval.rollouts"
    )
    max_tokens: int | None = Field(
        None, ge=1, description="tokens per answer; default: factory.yaml's eval.max_tokens"
    )
    seed: int | None = Field(None, ge=0, description="sampling seed; default: factory.yaml's eval.seed")


@dg.op(
    description="Evaluate the trained checkpoint on verifiable tasks; report beside it, linked in lineage."
)
def evaluate_checkpoint_op(
    context: dg.OpExecutionContext, config: EvaluateConfig, settings: SettingsResource, checkpoint: str
) -> dg.Output[str | None]:
    from ptfactory.errors import UserInputError
    from ptfactory.filters.execution import open_sandbox
    from ptfactory.training.eval.evaluate import evaluate
    from ptfactory.training.eval.model import resolve_model

    model = resolve_model(checkpoint)
    trained = (model.lineage or {}).get("dataset") or {}
    specs = list(config.tasks) or [f"{trained.get('ref')}:validation"]
    chosen = {"rollouts": config.rollouts, "max_tokens": config.max_tokens, "seed": config.seed}
    sampling = settings.config.eval.model_copy(update={k: v for k, v in chosen.items() if v is not None})
    box = settings.config.sandbox
    try:
        result = evaluate(
            model,
            specs,
            sampling,
            cache_path=settings.state_dir / "cache" / "responses.sqlite",
            sandbox=lambda: open_sandbox(box.limits(), box.workers, box.backend),
            policy=settings.config.agent.command_policy(),
            datasets=settings.datasets(),
            say=context.log.info,
        )
    except UserInputError as exc:
        if config.tasks:
            raise
        context.log.warning(f"not evaluated: {exc}")  # the default tasks: no verifiable validation rows
        return dg.Output(None, metadata={"evaluated": False, "why": str(exc)})
    overall = result.overall
    metadata: dict[str, dg.RawMetadataValue] = {
        "evaluated": True,
        "eval_run_id": result.run_id,
        "tasks": ", ".join(specs),
        "success_rate": float(overall["success_rate"] or 0.0),
        "ci95": str(overall["ci95"]),
        "report": dg.MetadataValue.path(str(result.paths[-1])),
    }
    return dg.Output(str(result.paths[-1]), metadata=metadata)


@dg.job(
    name="train_sft",
    description="Train SFT on a dataset version, then evaluate the checkpoint (set both in the Launchpad).",
)
def train_sft_job() -> None:
    evaluate_checkpoint_op(train_sft_op())
