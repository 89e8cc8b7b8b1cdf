"""The judge panel's part of factory.yaml: ``judges`` (one :class:`JudgeSpec` each) and ``judging``;
model families, which the panel records per judge and the self-preference warning compares.

Re-exported by :mod:`ptfactory.config`, where the whole file's model lives.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from ptfactory.engines.spec import EngineSpec
from ptfactory.section import Section

__all__ = ["JudgeSpec", "JudgingSection", "default_judges", "judge_family", "model_family"]


class JudgeSpec(Section):
    name: str = Field(pattern=r"^[a-z0-9_-]{1,40}$")
    type: Literal["llm", "relevance", "execution"] = "llm"
    engine: EngineSpec | None = Field(None, description="llm judges: the engine and model")
    family: str | None = Field(
        None,
        pattern=r"^[a-z0-9_.-]{1,40}$",
        description="model family (smollm2, gemma3, embedding, execution); default: from the model",
    )
    rubric: str = Field("rubric", description="template in annotators/judges/templates")
    max_tokens: int = Field(96, gt=0)
    scoring: Literal["auto", "probability", "json", "likelihood"] = Field(
        "auto",
        description=(
            "llm judges: probability reads the score from the model's probabilities over the score "
            "tokens (prefill only); json asks for a schema-constrained JSON vote; likelihood scores "
            "how plausible the model finds the response's own tokens after the prompt (Min-K% Prob, "
            "prefill only, no rubric); auto: json where the backend constrains JSON (vllm, openai), "
            "probability elsewhere"
        ),
    )
    likelihood_center: float = Field(
        -3.5, description="likelihood scoring: the Min-K% statistic of a borderline answer (score 5.5)"
    )
    likelihood_scale: float = Field(1.0, gt=0, description="likelihood scoring: the logistic's scale")
    prompt: Literal["chat", "completion"] = Field(
        "chat",
        description="chat: the model's chat template; completion: a few-shot text prompt (base models)",
    )

    @field_validator("prompt")
    @classmethod
    def _completion_scores_from_probabilities(cls, prompt: str, info: ValidationInfo) -> str:
        if prompt == "completion" and info.data.get("scoring") == "json":
            raise ValueError(
                "a completion prompt (a base model) is scored from probabilities; "
                "set scoring: probability (or auto), or prompt: chat for JSON votes"
            )
        return prompt


_FAMILY = re.compile(r"[a-z]+(?:[-_]?\d+(?:\.\d+)?(?=$|[-_.]))?")


def model_family(model_id: str) -> str:
    """A model's family from its name: ``SmolLM2-135M-Instruct`` -> ``smollm2``, ``gemma-3-270m-it``
    -> ``gemma3``, ``Qwen2.5-0.5B`` -> ``qwen2.5``, ``mistral-7b`` -> ``mistral``."""
    base = model_id.rstrip("/").rsplit("/", 1)[-1].lower()
    match = _FAMILY.match(base)
    family = match.group(0) if match else re.sub(r"[^a-z0-9_.-]", "-", base)
    return family.replace("-", "").replace("_", "")[:40] or "unknown"


def judge_family(spec: JudgeSpec, generator: EngineSpec) -> str:
    """``spec.family`` if given; else embedding / execution for those types, and for llm judges the
    family of their model (the generator's when they name no engine, as the panel does)."""
    if spec.family:
        return spec.family
    if spec.type == "relevance":
        return "embedding"
    if spec.type == "execution":
        return "execution"
    return model_family((spec.engine or generator).model_id)


def default_judges() -> list[JudgeSpec]:
    return [
        # likelihood scoring (prefill only, no rubric): on these small models it separates good
        # answers from bad ones where rating by a rubric does not (README, "The judge panel")
        JudgeSpec(name="smollm2", type="llm", engine=EngineSpec(), scoring="likelihood"),
        JudgeSpec(
            name="gemma3",
            type="llm",
            engine=EngineSpec(model="bundled:gemma3-270m"),
            family="gemma3",
            prompt="completion",  # a base model: no chat template
            scoring="likelihood",
            # Gemma's 262k-token vocabulary spreads probability thinner than SmolLM2's 49k: on the
            # demo batch the median Min-K% statistic was -4.66 against SmolLM2's -3.21, so its
            # borderline point sits 1.5 lower and the two families' votes share one scale
            likelihood_center=-5.0,
        ),
        JudgeSpec(name="minilm-relevance", type="relevance"),
        JudgeSpec(name="execution", type="execution"),
    ]


class JudgingSection(Section):
    min_counted_share: float = Field(
        0.95, ge=0, le=1, description="a judge counting fewer of its votes fails its check and is left out"
    )
    calibration_min_labels: int = Field(
        20, ge=1, description="expert labels needed before judges are weighted by their reliability"
    )
