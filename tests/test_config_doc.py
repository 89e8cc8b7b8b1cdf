"""docs/configuration.md is the generated reference of factory.yaml: it must match the config model."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from ptfactory.config import FactoryConfig
from ptfactory.pipelines.config_doc import DOC_PATH, REGENERATE, main, render


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every leaf key of the config model, dotted as the reference writes it."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += _keys(annotation, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def test_committed_reference_matches_the_config_model() -> None:
    committed = DOC_PATH.read_text(encoding="utf-8") if DOC_PATH.exists() else ""
    assert committed == render(), f"docs/configuration.md is out of date: run `{REGENERATE}` to regenerate it"


def test_every_key_has_a_line_with_its_default() -> None:
    text = render()
    lines = {
        line.split("|")[1].strip().strip("`"): line for line in text.splitlines() if line.startswith("| `")
    }
    for key in _keys(FactoryConfig):
        assert key in lines, f"{key} missing from the reference"
    assert "| `routing.accept_at` | float | `7.0` | ≥ 1; ≤ 10 |" in lines["routing.accept_at"]
    assert "`redact`, `drop`, `review`" in lines["privacy.action"]  # a Literal's allowed values
    assert lines["decontamination.benchmarks[].path"].split("|")[3].strip() == "required"


def test_check_fails_on_a_stale_file_and_names_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(render().replace("`7.0`", "`6.0`"), encoding="utf-8")
    assert main(["--check", "--out", str(stale)]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert main(["--out", str(stale)]) == 0
    assert main(["--check", "--out", str(stale)]) == 0
