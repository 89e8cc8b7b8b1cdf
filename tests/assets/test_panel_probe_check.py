"""The judge probe as judged_samples' asset check (assets/panel_probe.py), on the smallest panel (the
verifiers alone, the sandbox probes in the real Docker sandbox): it passes and keeps its report
under the state dir, a second batch under the same panel reads that report instead of probing
again, and a panel whose routing accepts what no vote backs is fooled by override text: the check
fails with severity ERROR and the probe table in its metadata."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from ptfactory.assets.judging import judged_samples
from ptfactory.assets.panel_probe import PROBE_CHECK, judged_samples_panel_probe
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import factory_resources
from ptfactory.storage.assetstore import AssetStore

pytestmark = pytest.mark.integration
PANEL = "judges:\n  - {name: execution, type: execution}\n"


def _check(home: Path, config: Path, batch: str, rows: Callable[..., Any]) -> dg.AssetCheckEvaluation:
    AssetStore(str(home)).write("difficulty_scored", rows(2, batch=batch), batch)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", [batch])
    upstream = dg.AssetSpec("difficulty_scored", partitions_def=batch_partitions).with_io_manager_key(
        "samples_io"
    )
    result = dg.materialize(
        [upstream, judged_samples, judged_samples_panel_probe],
        instance=instance,
        partition_key=batch,
        resources=factory_resources(str(config), str(home)),
        raise_on_error=False,
    )
    found = [e for e in result.get_asset_check_evaluations() if e.check_name == PROBE_CHECK]
    assert len(found) == 1
    return found[0]


def test_the_probe_check(home: Path, tmp_path: Path, rows: Callable[..., Any]) -> None:
    config = tmp_path / "factory.yaml"
    config.write_text(PANEL)
    first = _check(home, config, "b1", rows)
    assert first.passed, first.metadata["failures"].value
    assert first.metadata["cached"].value is False
    identity = first.metadata["panel_identity"].value
    assert (home / "probes" / f"{identity}.json").is_file()
    assert "kill_runner" in first.metadata["probe_table"].value  # the sandbox probes ran
    again = _check(home, config, "b2", rows)
    assert again.passed and again.metadata["cached"].value is True
    assert again.metadata["panel_identity"].value == identity

    # a row no vote backs is accepted: override text on a wrong answer gets through
    fooled = tmp_path / "fooled.yaml"
    fooled.write_text(PANEL + "routing: {silent: accept}\njudging: {verifiers: [answer]}\n")
    failed = _check(home, fooled, "b3", rows)
    assert not failed.passed and failed.severity == dg.AssetCheckSeverity.ERROR
    assert failed.metadata["panel_identity"].value != identity
    assert "override" in failed.metadata["failed_probes"].value
