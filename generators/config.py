"""Generation settings (the ``generation`` section of factory.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ptfactory.section import Section

__all__ = ["GenerationConfig", "SamplingConfig"]


class SamplingConfig(Section):
    n: int = Field(1, gt=0, le=64, description="samples per prompt")
    temperature: float = Field(0.7, ge=0, le=2)
    top_p: float = Field(0.95, gt=0, le=1)
    max_tokens: int = Field(256, gt=0)
    seed: int = 0


class SelfInstructConfig(Section):
    count: int = Field(4, ge=0, description="new instructions per batch")
    examples: int = Field(3, gt=0, description="seed tasks shown per prompt")
    novelty_threshold: float = Field(0.7, gt=0, le=1, description="drop if ROUGE-L >= this vs any earlier")


class EvolConfig(Section):
    count: int = Field(4, ge=0, description="seed instructions to evolve per batch")
    operations: tuple[Literal["deepen", "constraints", "broaden"], ...] = ("deepen", "constraints", "broaden")


class CodeConfig(Section):
    count: int = Field(2, ge=0, description="new code problems (with tests) per batch")


class GenerationConfig(Section):
    self_instruct: SelfInstructConfig = SelfInstructConfig()
    evol_instruct: EvolConfig = EvolConfig()
    code: CodeConfig = CodeConfig()
    instructions: SamplingConfig = SamplingConfig(temperature=0.9, max_tokens=160)
    code_problems: SamplingConfig = SamplingConfig(temperature=0.8, max_tokens=384)
    responses: SamplingConfig = SamplingConfig()
    include_seeds: bool = Field(True, description="seed instructions are candidates too")
