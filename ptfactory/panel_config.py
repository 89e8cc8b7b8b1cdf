"""The judge panel's part of factory.yaml: ``judges`` (one :class:`JudgeSpec` each) and ``judging``
(the verifiers that go first, the counted-share floor, the verified-row sample), and
:func:`build_panel`, which makes the :class:`~ptfactory.annotators.judges.Panel` from them.

``type: execution`` is kept as a thin alias: such a judge is the code verifier under the judge's
name (it decides code rows from the sandbox's run, as it always graded them), and it takes the
place of ``code`` in ``judging.verifiers``. Re-exported by :mod:`ptfactory.config`, where the whole
file's model lives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from ptfactory.annotators.judges import CalibrationStore, Judge, LLMJudge, Panel, RelevanceJudge, VerifierSet
from ptfactory.annotators.judges.identity import model_family
from ptfactory.annotators.judges.report import self_preference_warning
from ptfactory.engines.base import Engine
from ptfactory.engines.spec import EngineSpec
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.section import Section

__all__ = [
    "JudgeSpec",
    "JudgingSection",
    "build_panel",
    "default_judges",
    "judge_family",
    "model_family",
    "panel_warning",
]


class JudgeSpec(Section):
    name: str = Field(pattern=r"^[a-z0-9_-]{1,40}$")
    type: Literal["llm", "relevance", "execution"] = Field(
        "llm",
        description=(
            "llm | relevance (embedding) | execution: the code verifier under this name (an alias "
            "kept for existing files; the verifiers are listed in judging.verifiers)"
        ),
    )
    engine: EngineSpec | None = Field(None, description="llm judges: the engine and model")
    family: str | None = Field(
        None,
        pattern=r"^[a-z0-9_.-]{1,40}$",
        description="model family (smollm2, gemma3, embedding, execution); default: from the model",
    )
    rubric: str = Field("rubric", description="template in annotators/judges/templates")
    max_tokens: int = Field(96, gt=0)
    scoring: Literal["auto", "probability", "json", "likelihood", "pmi"] = Field(
        "auto",
        description=(
            "llm judges: probability reads the score from the model's probabilities over the score "
            "tokens (prefill only); json asks for a schema-constrained JSON vote; likelihood scores "
            "how plausible the model finds the response's own tokens after the prompt (Min-K% Prob, "
            "prefill only, no rubric); pmi scores how much the instruction raises those tokens' mean "
            "log-probability over the same frame with an empty instruction (two prefills, no "
            "rubric; the text's own fluency cancels out); auto: json where the backend constrains "
            "JSON (vllm, openai), probability elsewhere"
        ),
    )
    likelihood_center: float | None = Field(
        None,
        description=(
            "likelihood and pmi scoring: the statistic of a borderline answer (score 5.5); default "
            "-3.5 (Min-K%) for likelihood, 0.75 (nats per token) for pmi"
        ),
    )
    likelihood_scale: float | None = Field(
        None, gt=0, description="likelihood and pmi scoring: the logistic's scale; default 1.0, 0.25 for pmi"
    )
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
        # pmi scoring (prefill only, no rubric): on these small models likelihood separates good
        # answers from bad ones where rating by a rubric does not, and its gain over the same
        # frame without the instruction stops it preferring the generator's own text to a
        # reference (docs/judges.md, "The default judges and their scoring")
        JudgeSpec(name="smollm2", type="llm", engine=EngineSpec(), scoring="pmi"),
        JudgeSpec(
            name="gemma3",
            type="llm",
            engine=EngineSpec(model="bundled:gemma3-270m"),
            family="gemma3",
            prompt="completion",  # a base model: no chat template
            scoring="pmi",  # its centre and scale: pmi's defaults; calibration moves the centre
        ),
        JudgeSpec(name="minilm-relevance", type="relevance"),
    ]


VerifierKind = Literal["code", "answer", "procedural", "constraints", "agent", "consistency", "grader_note"]
_VERIFIERS: list[VerifierKind] = [
    "code", "answer", "procedural", "constraints", "agent", "consistency", "grader_note"
]  # fmt: skip


class JudgingSection(Section):
    verifiers: list[VerifierKind] = Field(
        default_factory=lambda: list(_VERIFIERS),
        description=(
            "verifiers that go first in the panel and decide where a check exists: code (tests in "
            "the sandbox), answer (the final answer against a reference, math-verify), procedural "
            "(reasoning-gym scorers), constraints (IFEval checks), agent (the episode's check re-run), "
            "consistency (rows without a reference: sampled answers that mark different final "
            "answers go to review), grader_note (a reply that speaks to its grader goes to review)"
        ),
    )
    min_counted_share: float = Field(
        0.95, ge=0, le=1, description="a judge counting fewer of its votes fails its check and is left out"
    )
    calibration_min_labels: int = Field(
        20, ge=1, description="expert labels needed before a calibration fit moves a judge's weight and cut"
    )
    probe: bool = Field(
        True,
        description=(
            "run the judge probe (ptf judge-probe) once per panel identity as judged_samples' "
            "check (cached under the state dir): it fails when the panel can be fooled"
        ),
    )
    verified_sample: int = Field(
        1000,
        ge=10,
        description=(
            "verifier-decided rows per batch the LLM/embedding judges still score (generated rows "
            "first), so their weight can be measured against the verifiers"
        ),
    )


def panel_warning(judges: list[JudgeSpec], generator: EngineSpec) -> str | None:
    """The self-preference warning: fires when ANY judge shares the generator's family."""
    families: dict[str, str | None] = {j.name: judge_family(j, generator) for j in judges if j.type == "llm"}
    return self_preference_warning(families, {model_family(generator.model_id)})


def build_panel(
    judges: list[JudgeSpec],
    judging: JudgingSection,
    generator: EngineSpec,
    *,
    engine: Callable[[str, EngineSpec], Engine],
    sandbox: Callable[[], Sandbox] | None = None,
    limits: Limits | None = None,
    store: CalibrationStore | Path | None = None,
) -> Panel:
    """The panel of factory.yaml: ``judging.verifiers`` first (a ``type: execution`` judge is the code
    verifier under its name), then the LLM and embedding judges, each with its family (for
    self-abstention); ``engine(name, spec)``: the engine of an LLM judge (shared per spec by the
    caller); ``sandbox``: opens the sandbox when a batch needs one; ``store``: the calibration store
    (or the state dir holding it) its persisted weights, cuts and centres come from."""
    members: list[tuple[str, str]] = [(str(kind), str(kind)) for kind in judging.verifiers]
    made: list[Judge] = []
    for spec in judges:
        if spec.type == "execution":
            members = [(spec.name, "code") if kind == "code" else (n, kind) for n, kind in members]
            if all(kind != "code" for _, kind in members):
                members.insert(0, (spec.name, "code"))
        elif spec.type == "relevance":
            made.append(RelevanceJudge(spec.name, family=judge_family(spec, generator)))
        else:
            engine_spec = spec.engine or generator
            judge = LLMJudge(
                spec.name,
                family=judge_family(spec, generator),
                engine=engine(spec.name, engine_spec),
                rubric=spec.rubric,
                max_tokens=spec.max_tokens,
                scoring=spec.scoring,
                prompt_style=spec.prompt,
                likelihood_center=spec.likelihood_center,
                likelihood_scale=spec.likelihood_scale,
            )
            judge.stats.price_per_mtok = engine_spec.price_per_mtok
            made.append(judge)
    if isinstance(store, Path):
        store = CalibrationStore.under(store)
    return Panel(
        made,
        VerifierSet(members, sandbox, limits),
        min_counted_share=judging.min_counted_share,
        store=store,
        verified_sample=judging.verified_sample,
    )
