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
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator

from ptfactory.annotators.routing import RoutingConfig
from ptfactory.engines.budget import BudgetConfig
from ptfactory.engines.spec import EngineSpec
from ptfactory.errors import ConfigError
from ptfactory.filters.dedup.core import DedupConfig
from ptfactory.filters.difficulty import DifficultyConfig
from ptfactory.filters.execution.limits import Limits
from ptfactory.generators.agent.settings import AgentSection
from ptfactory.generators.config import GenerationConfig
from ptfactory.panel_config import JudgeSpec, JudgingSection, default_judges, judge_family, model_family
from ptfactory.section import Section

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


class DedupSection(Section):
    threshold: float = Field(
        0.8, gt=0, le=1, description="Jaccard of word n-gram sets that makes a duplicate"
    )
    num_perm: int = Field(128, ge=16, le=1024, description="MinHash signature length")
    ngram: int = Field(5, ge=1, le=20, description="words per shingle")
    seed: int = 1
    against_published: bool = Field(True, description="also drop near duplicates of published samples")

    def to_config(self) -> DedupConfig:
        return DedupConfig(threshold=self.threshold, num_perm=self.num_perm, ngram=self.ngram, seed=self.seed)


class SandboxSection(Section):
    backend: Literal["auto", "docker", "bwrap"] = Field(
        "auto", description="auto: Docker if an engine answers"
    )
    workers: int | None = Field(None, gt=0, description="warm containers / concurrent jobs; default: cores")
    timeout_s: float = Field(10.0, gt=0, le=600)
    memory_mb: int = Field(256, ge=32)
    pids: int = Field(64, ge=8)
    cpus: float = Field(1.0, gt=0)
    output_bytes: int = Field(1 << 20, gt=0)
    jobs_per_container: int = Field(100, gt=0, description="recycle a container after this many jobs")

    def limits(self) -> Limits:
        return Limits(
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            pids=self.pids,
            cpus=self.cpus,
            output_bytes=self.output_bytes,
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


Kind = Literal["sft", "code", "preference"]
Method = Literal["pass_rate", "ifd", "none"]


def _default_methods() -> dict[Kind, Method]:
    return {"code": "pass_rate", "sft": "ifd", "preference": "none"}


class DifficultySection(Section):
    methods: dict[Kind, Method] = Field(default_factory=_default_methods)
    k: int = Field(4, ge=1, le=64, description="student attempts per row (pass_rate)")
    max_pass_rate: float = Field(0.75, ge=0, le=1, description="above: too_easy")
    temperature: float = Field(0.8, ge=0, le=2)
    max_tokens: int = Field(384, gt=0)
    ifd_min: float = Field(0.0, ge=0, description="absolute floor, IFD below: too_easy (0: none, IFD > 0)")
    ifd_max: float = Field(1.0, gt=0, description="IFD at or above: instruction_unhelpful")
    ifd_low_quantile: float = Field(
        0.1, ge=0, lt=1, description="IFD below the batch's quantile: too_easy (0: none)"
    )
    ifd_high_quantile: float = Field(
        1.0, gt=0, le=1, description="IFD above the batch's quantile: instruction_unhelpful (1: none)"
    )
    ifd_band_min_rows: int = Field(
        20, ge=1, description="fewer IFD-scored rows in a batch: the absolute band (ifd_min, ifd_max) only"
    )

    def to_config(self) -> DifficultyConfig:
        return DifficultyConfig(
            methods={str(k): str(v) for k, v in self.methods.items()},
            k=self.k,
            max_pass_rate=self.max_pass_rate,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            ifd_min=self.ifd_min,
            ifd_max=self.ifd_max,
            ifd_low_quantile=self.ifd_low_quantile,
            ifd_high_quantile=self.ifd_high_quantile,
            ifd_band_min_rows=self.ifd_band_min_rows,
        )


class RoutingSection(Section):
    accept_at: float = Field(7.0, ge=1, le=10, description="auto-accept at or above this judge mean...")
    max_spread: float = Field(3.0, ge=0, le=9, description="...when the judges disagree by at most this")
    reject_at: float = Field(3.0, ge=1, le=10, description="auto-reject at or below this judge mean")
    review_budget: int = Field(50, ge=0, description="rows per batch sent to expert review")
    silent: Literal["review", "accept", "reject"] = Field(
        "review",
        description=(
            "rows no judge could score, and rows that waited max_wait_batches for a review slot: "
            "review (routed, over budget) | accept | reject"
        ),
    )
    max_wait_batches: int = Field(
        3, ge=1, description="batches a row may wait for a review slot before it gets the `silent` verdict"
    )
    audit_rate: float = Field(
        0.02, ge=0, le=1, description="share of auto-accepted/rejected rows sent to blind audit review"
    )
    audit_budget: int = Field(5, ge=0, description="audit rows per batch (their own budget)")

    def to_config(self) -> RoutingConfig:
        return RoutingConfig(
            self.accept_at,
            self.max_spread,
            self.reject_at,
            self.review_budget,
            self.silent,
            max_wait_batches=self.max_wait_batches,
            audit_rate=self.audit_rate,
            audit_budget=self.audit_budget,
        )


class AnnotationSection(Section):
    url: str | None = Field(
        None,
        description="an existing Label Studio (its token in token_env); default: the one `ptf annotate up` runs",
    )
    port: int = Field(8080, ge=1, le=65535, description="port of the Label Studio `ptf annotate up` runs")
    token_env: str = Field("PTF_LS_TOKEN", description="env var holding the API token")
    project_prefix: str = Field("ptf review", min_length=1, description="project title: '<prefix>: <queue>'")
    push_batch: int = Field(200, gt=0, description="tasks per import request")
    pull_page: int = Field(100, gt=0, le=1000, description="tasks per page when pulling annotations")
    curation_interval_s: int = Field(
        30,
        ge=5,
        le=86_400,
        description="the label sensor's interval: it pulls and starts at most one curation run per interval",
    )


class FactoryConfig(Section):
    seeds: SeedsConfig = SeedsConfig()
    storage: StorageConfig = StorageConfig()
    datasets: DatasetsConfig = DatasetsConfig()
    engines: EnginesConfig = EnginesConfig()
    generation: GenerationConfig = GenerationConfig()
    dedup: DedupSection = DedupSection()
    sandbox: SandboxSection = SandboxSection()
    difficulty: DifficultySection = DifficultySection()
    judges: list[JudgeSpec] = Field(default_factory=default_judges, min_length=1, validate_default=True)
    judging: JudgingSection = JudgingSection()
    routing: RoutingSection = RoutingSection()
    annotation: AnnotationSection = AnnotationSection()
    scale: ScaleSection = ScaleSection()
    budget: BudgetConfig = Field(BudgetConfig(), exclude=True)  # engines/budget.py; not in the hash
    agent: AgentSection = AgentSection()  # keys documented in generators/agent/settings.py

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
