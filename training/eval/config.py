"""``eval:`` in factory.yaml: how ``ptf eval`` and the ``train_sft`` job's evaluation step sample and report."""

from __future__ import annotations

from pydantic import Field

from ptfactory.section import Section

__all__ = ["EvalSection"]


class EvalSection(Section):
    """How checkpoints are evaluated; ``ptf eval``'s flags override each field."""

    rollouts: int = Field(
        1, ge=1, le=1024, description="sampled answers per task (pass@k needs k <= rollouts)"
    )
    temperature: float | None = Field(
        None,
        ge=0,
        description="sampling temperature; default: 0 (greedy) with one rollout, 0.7 with several",
    )
    top_p: float = Field(0.95, gt=0, le=1, description="nucleus sampling (ignored when greedy)")
    max_tokens: int = Field(256, ge=1, description="tokens per answer (per step for agent tasks)")
    seed: int = Field(0, ge=0, description="sampling seed: the same seed draws the same answers")
    agent_max_steps: int | None = Field(None, ge=1, description="cap every agent task's step budget")
    bootstrap_resamples: int = Field(2000, ge=100, description="resamples of the tasks for the 95 % interval")

    def sampling_temperature(self) -> float:
        if self.temperature is not None:
            return self.temperature
        return 0.0 if self.rollouts == 1 else 0.7
