"""``rl:`` in factory.yaml (its own module: ptfactory/config.py reads it without the measuring code)."""

from __future__ import annotations

from pydantic import Field, model_validator

from ptfactory.section import Section

__all__ = ["RLSection"]


class RLSection(Section):
    """``rl:`` in factory.yaml: which rows the ``rl`` dataset keeps and what measuring them costs."""

    name: str = Field("rl", min_length=1, description="name of the rl dataset")
    min_pass_rate: float = Field(
        0.0, ge=0, lt=1, description="the student's pass rate at or below it: too_hard (no reward signal)"
    )
    max_pass_rate: float = Field(
        1.0, gt=0, le=1, description="at or above it: too_easy (every sampled completion already right)"
    )
    k: int = Field(
        4,
        ge=2,
        le=64,
        description="student attempts per prompt measured here (rows the difficulty stage measured keep theirs)",
    )
    max_prompts: int = Field(
        8,
        ge=0,
        description="prompts measured per run at most (k attempts each); the rest wait for the next run "
        "(left out as no_pass_rate meanwhile); 0: only pass rates measured elsewhere",
    )
    temperature: float = Field(0.7, gt=0, le=2, description="the student's sampling temperature")
    max_tokens: int = Field(192, ge=1, description="tokens per attempt")
    seed: int = Field(0, ge=0, description="sampling seed (the same seed draws the same attempts)")

    @model_validator(mode="after")
    def _band(self) -> RLSection:
        if self.min_pass_rate >= self.max_pass_rate:
            raise ValueError(
                f"min_pass_rate {self.min_pass_rate} must be below max_pass_rate {self.max_pass_rate}"
            )
        return self

    def band(self) -> tuple[float, float]:
        return self.min_pass_rate, self.max_pass_rate
