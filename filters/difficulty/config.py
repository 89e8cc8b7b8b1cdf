"""The ``difficulty`` section of factory.yaml (:class:`DifficultyConfig`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ptfactory.section import Section

__all__ = ["REMOVED_KEYS", "DifficultyConfig", "Kind", "Method"]

# ``math``: SFT rows whose ``reference`` carries a final answer (a GSM8K-style seed's, and every
# response sampled for it); the other keys are the rows' kinds.
Kind = Literal["sft", "code", "preference", "math"]
Method = Literal["pass_rate", "ifd", "none"]

# The batch-quantile IFD band (a fixed share of every batch dropped, whatever its values) gave way
# to absolute thresholds measured on the factory's own generations (docs/difficulty.md).
REMOVED_KEYS = {
    "ifd_low_quantile": "IFD is held to fixed thresholds measured on the factory's own generations "
    "(docs/difficulty.md), not to a share of each batch: set difficulty.ifd_min (too_easy below it)",
    "ifd_high_quantile": "IFD is held to fixed thresholds measured on the factory's own generations "
    "(docs/difficulty.md), not to a share of each batch: set difficulty.ifd_max "
    "(instruction_unhelpful at or above it)",
    "ifd_band_min_rows": "the IFD band no longer depends on the batch (difficulty.ifd_min, "
    "difficulty.ifd_max hold for every batch)",
}


def _default_methods() -> dict[Kind, Method]:
    return {"code": "pass_rate", "math": "pass_rate", "sft": "ifd", "preference": "none"}


class DifficultyConfig(Section):
    """The ``difficulty`` section of factory.yaml, and what ``score_difficulty`` reads.

    IFD thresholds (``ifd_min``, ``ifd_max``): both IFD passes score the response after the same
    chat frame (the instruction, or an empty user turn), so IFD compares like with like and 1.0
    means "the instruction does not help". The defaults come from the distribution measured with
    ``bench/ifd.py`` on the factory's own generations (the bundled SmolLM2 answering demo/seeds)
    and on matched vs mismatched instruction/answer pairs; docs/difficulty.md has the figures.
    A student model of another family or size shifts IFD: measure it with the same command.
    """

    methods: dict[Kind, Method] = Field(
        default_factory=_default_methods,
        description="difficulty method per row kind; 'math' is every SFT row whose reference carries a "
        "final answer (the student's answers and the row's checked with the answer verifier)",
    )
    k: int = Field(4, ge=1, le=64, description="student attempts per row (pass_rate)")
    max_pass_rate: float = Field(0.75, ge=0, le=1, description="above: too_easy")
    temperature: float = Field(0.8, ge=0, le=2, description="the student's sampling temperature")
    max_tokens: int = Field(384, gt=0, description="tokens per student attempt")
    ifd_min: float = Field(
        0.02,
        ge=0,
        description="IFD below: too_easy (the response all but copies its instruction: an echo of "
        "the input); 0: none. Default measured: docs/difficulty.md",
    )
    ifd_max: float = Field(
        0.9,
        gt=0,
        description="IFD at or above: instruction_unhelpful (the instruction barely helps predict the "
        "response; at 1 not at all: an answer to another question). Default measured: docs/difficulty.md",
    )

    @model_validator(mode="before")
    @classmethod
    def _removed_keys(cls, data: Any) -> Any:
        """The quantile band's keys fail naming what replaced them, rather than as unknown keys."""
        if isinstance(data, dict):
            for key, instead in REMOVED_KEYS.items():
                if key in data:
                    raise ValueError(f"'{key}' was removed: {instead}; delete it")
        return data

    @model_validator(mode="after")
    def _band(self) -> DifficultyConfig:
        if self.ifd_min >= self.ifd_max:
            raise ValueError(
                f"ifd_min ({self.ifd_min:g}) must be below ifd_max ({self.ifd_max:g}): "
                "no IFD value could be kept"
            )
        return self
