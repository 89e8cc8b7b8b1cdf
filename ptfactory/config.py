"""``factory.yaml``: the one business configuration, validated by pydantic.

Defaults are the embedded one-machine set-up, so an empty (or absent) file works.
A wrong key or value is one line naming the key and what is allowed::

    factory.yaml: unknown key 'storage.shard_row'; allowed under 'storage': shard_rows
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator

from ptfactory.annotators.labelstudio.settings import AnnotationConfig
from ptfactory.annotators.routing import RoutingConfig
from ptfactory.engines.budget import BudgetConfig
from ptfactory.engines.spec import EngineSpec
from ptfactory.errors import ConfigError
from ptfactory.filters.decontamination.config import DecontaminationConfig
from ptfactory.filters.dedup.core import DedupConfig
from ptfactory.filters.dedup.semantic import SemanticDedupConfig
from ptfactory.filters.difficulty import DifficultyConfig
from ptfactory.filters.execution.limits import SandboxConfig
from ptfactory.filters.execution.validate import ExecutionConfig
from ptfactory.filters.privacy.config import PrivacyConfig
from ptfactory.generators.agent.settings import AgentSection
from ptfactory.generators.config import GenerationConfig
from ptfactory.generators.procedural import ProceduralSeeds
from ptfactory.panel_config import JudgeSpec, JudgingSection, default_judges, judge_family, model_family
from ptfactory.section import Section
from ptfactory.training.eval.config import EvalSection
from ptfactory.training.rl_config import RLSection

__all__ = [
    "DatasetsConfig",
    "EnginesConfig",
    "FactoryConfig",
    "JudgeSpec",
    "JudgingSection",
    "SeedsConfig",
    "StorageConfig",
    "judge_family",
    "load_config",
    "model_family",
]


class SeedsConfig(Section):
    max_field_chars: int = Field(100_000, gt=0, description="longest text allowed in one seed field")
    procedural: ProceduralSeeds = Field(
        ProceduralSeeds(),
        description="reasoning-gym tasks (with their own scorers) added to every batch's seed files",
    )


class StorageConfig(Section):
    shard_rows: int = Field(50_000, gt=0, description="rows per Parquet shard of a published version")


class DatasetsConfig(Section):
    sft: str = Field("sft", description="name of the SFT dataset")
    preference: str = Field("preference", description="name of the preference (DPO) dataset")
    pair_margin: float = Field(
        2.0,
        gt=0,
        le=9,
        description="judge-mean gap between an instruction's best and worst answer that makes them a "
        "preference candidate (compared by the LLM judges in both orders, then routed)",
    )
    validation_fraction: float = Field(
        0.1, ge=0, lt=1, description="share of dedup clusters held out as the validation split"
    )


class RaySection(Section):
    address: str = Field(
        "",
        description="Ray cluster for dedup and execution validation: auto, host:port or ray://host:port; "
        "empty: in-process",
    )
    shard_rows: int = Field(20_000, gt=0, description="texts per dedup hash task")
    chunk_jobs: int = Field(100, gt=0, description="sandbox jobs per validation task")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        if value and value != "auto" and not re.fullmatch(r"(ray://)?[\w.\-]+:\d+", value):
            raise ValueError(f"{value!r} is not a Ray address; use auto, host:port or ray://host:port")
        return value


class ScaleSection(Section):
    ray: RaySection = RaySection()


class EnginesConfig(Section):
    generator: EngineSpec = EngineSpec()
    student: EngineSpec = Field(
        EngineSpec(), description="answers k times for pass-rate difficulty; scores IFD"
    )


class FactoryConfig(Section):
    seeds: SeedsConfig = SeedsConfig()
    storage: StorageConfig = StorageConfig()
    datasets: DatasetsConfig = DatasetsConfig()
    engines: EnginesConfig = EnginesConfig()
    generation: GenerationConfig = GenerationConfig()
    privacy: PrivacyConfig = PrivacyConfig()  # filters/privacy: seeds, generations, remote requests
    dedup: DedupConfig = DedupConfig()
    semantic_dedup: SemanticDedupConfig = SemanticDedupConfig()  # filters/dedup/semantic.py
    decontamination: DecontaminationConfig = DecontaminationConfig()  # filters/decontamination
    sandbox: SandboxConfig = SandboxConfig()
    execution: ExecutionConfig = ExecutionConfig()  # filters/execution/validate.py: sandbox faults
    difficulty: DifficultyConfig = DifficultyConfig()
    judges: list[JudgeSpec] = Field(default_factory=default_judges, min_length=1, validate_default=True)
    judging: JudgingSection = JudgingSection()
    routing: RoutingConfig = RoutingConfig()
    annotation: AnnotationConfig = AnnotationConfig()
    scale: ScaleSection = ScaleSection()
    budget: BudgetConfig = Field(BudgetConfig(), exclude=True)  # engines/budget.py; not in the hash
    agent: AgentSection = AgentSection()  # keys documented in generators/agent/settings.py
    rl: RLSection = RLSection()  # training/rl_config.py: which rows the rl dataset keeps (hashed)
    # ptf eval's sampling and report (training/eval/config.py); how a model is measured, not what
    # a version holds: not in the hash
    eval: EvalSection = Field(EvalSection(), exclude=True)

    @field_validator("judges")
    @classmethod
    def _name_and_family_judges(cls, judges: list[JudgeSpec], info: ValidationInfo) -> list[JudgeSpec]:
        """Judge names are unique (votes, costs and families are keyed by them); every judge gets
        its family, derived from its model when factory.yaml does not name one."""
        names = [j.name for j in judges]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice:
            raise ValueError(f"judge name {twice!r} appears twice; give every judge its own name")
        engines = info.data.get("engines")
        generator = engines.generator if isinstance(engines, EnginesConfig) else EngineSpec()
        return [j.model_copy(update={"family": judge_family(j, generator)}) for j in judges]

    def config_hash(self) -> str:
        """A stable hash of the resolved configuration, recorded in every manifest."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _one_line(source: str, exc: ValidationError) -> str:
    error = exc.errors()[0]
    loc = tuple(error["loc"])
    key = ".".join(str(p) for p in loc)
    if error["type"] == "extra_forbidden":
        parent = _model_at(FactoryConfig, loc[:-1])
        allowed = ", ".join(parent.model_fields) if parent else "?"
        where = f"under '{'.'.join(str(p) for p in loc[:-1])}'" if loc[:-1] else "at the top level"
        return f"{source}: unknown key '{key}'; allowed {where}: {allowed}"
    given = error.get("input")
    shown = json.dumps(given) if isinstance(given, str | int | float | bool) else type(given).__name__
    if error["type"] == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return f"{source}: '{key}' is {shown}; allowed: {expected}"
    return f"{source}: '{key}' is {shown}: {error['msg']}"


def parse_config(data: Any, source: str = "factory.yaml") -> FactoryConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping of sections at the top level, got {type(data).__name__}"
        )
    try:
        return FactoryConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_one_line(source, exc)) from None


def load_config(path: Path | None = None, *, required: bool = False) -> FactoryConfig:
    """Read and validate ``path``; an absent file gives the defaults unless ``required``."""
    path = path or Path("factory.yaml")
    if not path.exists():
        if required:
            raise ConfigError(f"config file {path} does not exist")
        return FactoryConfig()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{line} ({getattr(exc, 'problem', exc)})") from None
    return parse_config(data, str(path))
