"""The label sensor's interval (its debounce: at most one curation run per interval) comes from
factory.yaml's ``annotation.curation_interval_s``, read when the definitions load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptfactory.errors import ConfigError
from ptfactory.pipelines.sensors import build_label_sensor, configured_interval


def test_the_interval_comes_from_the_project_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PTF_CONFIG", raising=False)
    assert configured_interval() == 30  # no factory.yaml: the default
    (tmp_path / "factory.yaml").write_text("annotation: {curation_interval_s: 300}\n")
    assert configured_interval() == 300
    assert build_label_sensor(300).minimum_interval_seconds == 300
    (tmp_path / "factory.yaml").write_text("annotation: {curation_interval_s: 1}\n")
    with pytest.raises(ConfigError, match="curation_interval_s"):
        configured_interval()


def test_the_loaded_definitions_use_it(tmp_path: Path) -> None:
    config = tmp_path / "other.yaml"
    config.write_text("annotation: {curation_interval_s: 120}\n")
    code = (
        "from ptfactory.pipelines.definitions import defs\n"
        "print(defs.resolve_sensor_def('human_labels_sensor').minimum_interval_seconds)\n"
    )
    env = {**os.environ, "PTF_CONFIG": str(config)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip().splitlines()[-1] == "120"
