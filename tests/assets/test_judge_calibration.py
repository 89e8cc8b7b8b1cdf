"""The calibration asset (assets/calibration.py) through Dagster with the real panel: expert labels on
curated rows fit each judge and the fit lands in the calibration store under the judge's identity,
where the next panel reads it (a likelihood judge's centre, its persisted weight); a judge whose
identity changed (another scoring method behind the same name) is reset, not fitted; two copies of
one sample count once, the last decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from ptfactory.annotators.judges import CalibrationStore
from ptfactory.annotators.judges.calibration import examples
from ptfactory.assets.calibration import judge_calibration
from ptfactory.assets.resources import EnginesResource, PanelResource, SettingsResource, factory_resources
from ptfactory.storage.schema import from_records
from tests.annotators.test_calibration import _row

pytestmark = pytest.mark.integration


def _vote(identity: str, score: float) -> dict[str, Any]:
    return {
        "judge": "tiny",
        "model": "m",
        "score": score,
        "verdict": "accept" if score >= 6 else "reject",
        "parsed": True,
        "method": "likelihood",
        "raw": str(-2.0 if score >= 6 else -6.0),  # the Min-K% statistic the centre is fitted on
        "identity": identity,
    }


def _curated(identity: str, n: int = 24) -> pa.Table:
    """Experts alternate accept / reject; the judge agrees on all but every sixth row."""
    records = []
    for i in range(n):
        expert = i % 2 == 0
        agrees = i % 6 != 5
        records.append(
            _row(i, "accept" if expert else "reject", [_vote(identity, 8.0 if agrees == expert else 2.0)])
        )
    return from_records(records)


def _panel(home: Path, config: Path) -> PanelResource:
    return PanelResource(
        engines=EnginesResource(settings=SettingsResource(home=str(home), config_path=str(config)))
    )


def _materialize(home: Path, config: Path, curated: pa.Table) -> dict[str, Any]:
    @dg.asset(name="curated_samples")
    def upstream() -> pa.Table:
        return curated

    result = dg.materialize(
        [upstream, judge_calibration], resources=factory_resources(str(config), str(home))
    )
    assert result.success
    return {
        k: v.value for k, v in result.asset_materializations_for_node("judge_calibration")[0].metadata.items()
    }


def test_the_fit_lands_in_the_store_by_identity(home: Path, tmp_path: Path, tiny_model: Path) -> None:
    config = tmp_path / "factory.yaml"
    judge = f"{{name: tiny, type: llm, engine: {{model: {tiny_model}}}, scoring: SCORING}}"
    config.write_text(
        f"engines:\n  generator: {{model: {tiny_model}}}\n"
        f"judges:\n  - {judge.replace('SCORING', 'likelihood')}\n"
        "judging: {calibration_min_labels: 10}\n"
    )
    key = _panel(home, config).panel().identities()["tiny"][0]
    meta = _materialize(home, config, _curated(key))
    assert meta["labels"] == 24 and meta["stored"] == "tiny"
    store = CalibrationStore.under(home)
    persisted = store.persisted(key)
    assert persisted is not None and persisted.weight == pytest.approx(meta["weights"]["tiny"], abs=1e-3)
    assert persisted.weight > 0.5 and persisted.cut is not None
    # the next panel scores from the fitted centre (between the two statistics), not the default
    fresh = _panel(home, config).panel()
    fresh._centre()
    assert -6.0 < fresh.judges[0].likelihood_center < -2.0  # type: ignore[attr-defined]
    assert fresh.judges[0].likelihood_center != -3.5  # type: ignore[attr-defined]

    # the same name, another scoring method: another identity, reset (its old labels fit nothing)
    config.write_text(config.read_text().replace("scoring: likelihood", "scoring: probability"))
    new_key = _panel(home, config).panel().identities()["tiny"][0]
    assert new_key != key
    meta = _materialize(home, config, _curated(key))
    assert meta["stored"] == "none" and meta["judge_identity_resets"] == "tiny"
    assert store.persisted(new_key) is None


def test_one_label_per_sample_the_last_decision() -> None:
    first = _row(1, "accept", [_vote("k", 8.0)])
    later = _row(1, "reject", [_vote("k", 8.0)])
    found = examples(from_records([first, later]))
    assert [e.expert for e in found] == [False]
