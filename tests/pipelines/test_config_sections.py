"""One typed config per stage: the factory.yaml section IS the class the stage's library code takes
(no twin copied field by field), and old factory.yaml files still validate."""

from __future__ import annotations

import typing
from collections.abc import Callable
from pathlib import Path

import pytest

from ptfactory.annotators.routing import route
from ptfactory.config import FactoryConfig, load_config
from ptfactory.errors import ConfigError
from ptfactory.filters.decontamination import load_index
from ptfactory.filters.dedup.samples import dedup_samples
from ptfactory.filters.dedup.semantic import semantic_dedup_samples
from ptfactory.filters.difficulty import score_difficulty
from ptfactory.filters.execution.limits import Limits, SandboxConfig
from ptfactory.filters.execution.select import open_sandbox
from ptfactory.filters.privacy import clean_samples, redact_seed_files
from ptfactory.generators.instructions import generate_instructions
from ptfactory.generators.responses import generate_responses

ROOT = Path(__file__).resolve().parents[2]


def _param_class(function: Callable[..., object], name: str) -> object:
    hints = typing.get_type_hints(function)
    annotation = hints[name]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if args else annotation


@pytest.mark.parametrize(
    ("section", "function", "parameter"),
    [
        ("dedup", dedup_samples, "config"),
        ("difficulty", score_difficulty, "config"),
        ("routing", route, "config"),
        ("generation", generate_instructions, "config"),
        ("semantic_dedup", semantic_dedup_samples, "config"),
        ("decontamination", load_index, "config"),
        ("privacy", clean_samples, "config"),
        ("privacy", redact_seed_files, "config"),
    ],
)
def test_the_stage_takes_the_section_class(
    section: str, function: Callable[..., object], parameter: str
) -> None:
    assert FactoryConfig.model_fields[section].annotation is _param_class(function, parameter)


def test_the_responses_stage_takes_the_generation_subsection() -> None:
    sampling = FactoryConfig.model_fields["generation"].annotation.model_fields["responses"].annotation  # type: ignore[union-attr]
    assert _param_class(generate_responses, "sampling") is sampling


def test_the_sandbox_section_is_the_limits_a_sandbox_takes() -> None:
    assert FactoryConfig.model_fields["sandbox"].annotation is SandboxConfig
    assert issubclass(SandboxConfig, Limits)
    assert _param_class(open_sandbox, "limits") is Limits
    # the per-job limits keep only their own keys (a job's cache key and a remote worker read them)
    settings = SandboxConfig(timeout_s=3, backend="docker", workers=2)
    assert settings.limits() == Limits(timeout_s=3)
    assert set(settings.limits().to_dict()) == set(Limits.model_fields)


def test_shipped_factory_files_validate() -> None:
    for path in [ROOT / "factory.yaml", ROOT / "demo" / "factory.yaml"]:
        load_config(path, required=True)


def test_an_unknown_key_names_the_section_keys(tmp_path: Path) -> None:
    path = tmp_path / "factory.yaml"
    path.write_text("difficulty:\n  ifd_quantile: 0.2\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert "unknown key 'difficulty.ifd_quantile'" in message
    assert "ifd_min" in message
