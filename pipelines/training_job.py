"""``train_sft``: launch a training run from the Dagster UI (Launchpad), recorded like any run."""

import dagster as dg
from pydantic import Field

from ptfactory.assets.resources import FactoryResource
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
    context: dg.OpExecutionContext, config: TrainSftConfig, factory: FactoryResource
) -> dg.Output[str]:
    output = config.output or str(factory.state_dir / "trained" / context.run_id)
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
        factory.datasets(),
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


@dg.job(
    name="train_sft", description="Train SFT on a dataset version (set dataset/model/steps in the Launchpad)."
)
def train_sft_job() -> None:
    train_sft_op()
