"""`python -m ptfactory.pipelines.prepare_models` (make demo-setup): a config's bundled models converted
before the run, once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ptfactory.engines.ct2_models import ct2_model_dir
from ptfactory.pipelines.prepare_models import config_engines, main, prepare


def test_prepare_converts_the_configs_bundled_models_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In the suite's shared models folder (PTF_MODELS_DIR: converting afresh costs ~50 s, and the
    conversions themselves, atomic and keyed by the weights, are tested in test_ct2_engine.py)."""
    models = Path(os.environ["PTF_MODELS_DIR"])
    config = tmp_path / "factory.yaml"
    config.write_text(
        "engines:\n  generator: {backend: ctranslate2}\n  student: {backend: auto, model: bundled}\n"
        "judges:\n  - {name: far, type: llm, engine: {backend: openai, model: m, base_url: 'http://127.0.0.1:9'}}\n"
        "  - {name: self, type: llm}\n"
    )
    specs = config_engines(config)
    # the generator (ctranslate2), the student (auto: transformers), the openai judge; "self" is the generator's
    assert [(s.backend, s.model) for s in specs] == [
        ("ctranslate2", "bundled"),
        ("auto", "bundled"),
        ("openai", "m"),
    ]
    assert main([str(config)]) == 0
    out = capsys.readouterr().out
    hf = models / "SmolLM2-135M-Instruct"
    assert (hf / "config.json").is_file() and f"bundled (ctranslate2): {hf}" in out
    assert f"bundled (transformers): {hf}" in out
    ct2 = prepare(specs[0])[1]
    assert (ct2 / "model.bin").is_file() and ct2 == ct2_model_dir("bundled")  # the folder the engine loads
    stamp = (ct2 / "model.bin").stat().st_mtime_ns
    assert prepare(specs[0]) == [hf, ct2] and (ct2 / "model.bin").stat().st_mtime_ns == stamp  # not again
    assert prepare(specs[2]) == []  # a server: nothing to convert


def test_prepare_names_a_missing_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err
