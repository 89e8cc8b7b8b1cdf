"""Judge calibration from expert labels: AUC weights, agreement, the report a version's manifest keeps,
and one real publish: `ptf datasets show` reads the report back, and no panel takes its weights from
it (the calibration store, keyed by judge identity, holds those: test_calibration_store.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from ptfactory.annotators.judges.calibration import (
    Calibration,
    Example,
    calibrate,
    cohen_kappa,
    examples,
)
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.versions import DatasetStore

ACCEPT_AT = 7.0


def _synthetic(n: int = 200) -> list[Example]:
    """Experts alternate accept/reject; judge A agrees on 9 rows in 10, B on 11 in 20, C on 2 in 5."""
    rows = []
    for i in range(n):
        expert = i % 2 == 0

        def score(agrees: bool, expert: bool = expert) -> float:
            return 8.0 if agrees == expert else 2.0  # accept-side score when the call is "accept"

        votes = {"a": score(i % 10 != 0), "b": score(i % 20 < 11), "c": score(i % 5 < 2)}
        rows.append(Example(expert, votes, sum(votes.values()) / 3, audit=i % 4 == 0))
    return rows


def test_weights_move_toward_the_judge_that_separates_the_labels() -> None:
    cal = calibrate(_synthetic(), min_labels=20, accept_at=ACCEPT_AT)
    assert cal.labels == 200
    assert cal.accuracy == {"a": 0.9, "b": 0.55, "c": 0.4}
    assert cal.fits["a"]["auc"] == 0.9 and cal.fits["b"]["auc"] == 0.55  # two-valued votes: AUC = accuracy
    assert cal.weights is not None
    assert cal.weights["a"] == 0.8 and cal.weights["b"] == 0.1 and cal.weights["c"] == 0.0  # 2 AUC - 1, >= 0
    assert cal.audit is not None and cal.audit.rows == 50


def test_too_few_labels_fit_nothing_but_report_the_agreement() -> None:
    rows = _synthetic(30)
    cal = calibrate(rows, min_labels=31, accept_at=ACCEPT_AT)
    assert cal.weights is None and cal.accuracy and cal.fits  # agreement and fits are reported
    assert calibrate(rows, 30, ACCEPT_AT).weights is not None


def test_accuracy_and_kappa_on_a_hand_checked_example() -> None:
    from sklearn.metrics import cohen_kappa_score

    expert = [True, True, False, False, True, False]
    scores = [8.0, 7.0, 3.0, 6.0, 2.0, 1.0]  # calls at >= 6: T T F T F F -> 4 of 6 right
    means = [9.0, 7.0, 5.0, 8.0, 6.0, 2.0]  # at >= 7: T T F T F F
    rows = [Example(e, {"j": s}, m, audit=False) for e, s, m in zip(expert, scores, means, strict=True)]
    cal = calibrate(rows, min_labels=1, accept_at=ACCEPT_AT)
    # po = 4/6, pe = 0.5 * 0.5 + 0.5 * 0.5 = 0.5: kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert cal.accuracy["j"] == round(4 / 6, 4) and cal.panel_accuracy == round(4 / 6, 4)
    assert cal.kappa["j"] == cal.panel_kappa == round(1 / 3, 4)
    calls = [s >= 6 for s in scores]
    assert cal.kappa["j"] == round(cohen_kappa_score(calls, expert), 4)
    assert cal.audit is None  # no audit row labelled
    assert cohen_kappa([True, True], [True, True]) is None  # chance agreement 1: undefined
    assert cohen_kappa([], []) is None


def test_stats_round_trip_through_json() -> None:
    cal = calibrate(_synthetic(40), min_labels=10, accept_at=ACCEPT_AT)
    body = json.loads(json.dumps(cal.to_stats()))
    assert Calibration.from_stats(body) == cal
    few = calibrate(_synthetic(8)[:1], min_labels=10, accept_at=ACCEPT_AT)  # kappa None, no audit
    assert Calibration.from_stats(json.loads(json.dumps(few.to_stats()))) == few


# ---- rows as curation leaves them ---------------------------------------------------------------


def _vote(judge: str, score: float | None, parsed: bool = True) -> dict[str, Any]:
    return {
        "judge": judge,
        "model": "m",
        "score": score,
        "verdict": "accept" if (score or 0) >= 6 else "reject",
        "parsed": parsed,
        "method": "json",
    }


def _row(i: int, review: str | None, votes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    messages = [
        {"role": "user", "content": f"Question {i}: what is {i} times three?"},
        {"role": "assistant", "content": f"It is {3 * i}."},
    ]
    counted = [v["score"] for v in votes if v["parsed"] and v["score"] is not None]
    route = extra.pop("route", ("route", "needs_review", "spread 4"))
    trail = [
        {"stage": "seed", "verdict": "keep", "reason": "test", "detail": None},
        {"stage": "judge", "verdict": "keep", "reason": "scored", "detail": None},
        {"stage": "route", "verdict": route[0], "reason": route[1], "detail": route[2]},
    ]
    if review:
        reason = {"accept": "human_accept", "reject": "human_reject", "edit": "human_correction"}[review]
        trail.append({"stage": "review", "verdict": review, "reason": reason, "detail": "by ann"})
    return {
        "sample_id": sample_id("sft", messages),
        "batch": "b1",
        "kind": "sft",
        "messages": messages,
        "provenance": {"method": "test", "seed_task_id": f"t{i}"},
        "scores": {
            "judges": votes,
            "judge_mean": sum(counted) / len(counted) if counted else None,
        },
        "decisions": trail,
        "annotation": {"annotator": "ann", "verdict": "accept" if review == "edit" else review}
        if review
        else None,
        **extra,
    }


def test_examples_read_the_review_decisions() -> None:
    audit = ("route", "audit", "audit of auto_accept; mean 8")
    table = from_records(
        [
            _row(1, "accept", [_vote("a", 8), _vote("b", 3)]),
            _row(2, "reject", [_vote("a", 2), _vote("b", None, parsed=False)]),
            _row(3, "edit", [_vote("a", 9)]),  # corrected: the original was not acceptable
            _row(4, None, [_vote("a", 9)]),  # not labelled yet
            _row(5, "accept", [_vote("a", None, parsed=False)]),  # no counted vote: nothing to fit
            _row(6, "accept", [_vote("a", 8)], route=audit),
        ]
    )
    found = examples(table)
    assert [(e.expert, e.votes, e.audit) for e in found] == [
        (True, {"a": 8.0, "b": 3.0}, False),
        (False, {"a": 2.0}, False),
        (False, {"a": 9.0}, False),
        (True, {"a": 8.0}, True),
    ]
    cal = calibrate(table, min_labels=1, accept_at=ACCEPT_AT)
    assert cal.votes == {"a": 4, "b": 1} and cal.accuracy["a"] == 0.75
    assert cal.audit is not None and cal.audit.rows == 1 and cal.audit.panel_accuracy == 1.0


# ---- a real publish --------------------------------------------------------------------------------


def _curated(n: int = 40) -> pa.Table:
    """Labelled rows: judge A agrees with the experts on 9 in 10, B on 11 in 20; rejects unpublished."""
    records = []
    for i in range(n):
        expert = i % 2 == 0

        def score(agrees: bool, expert: bool = expert) -> float:
            return 8.0 if agrees == expert else 2.0

        votes = [_vote("judge_a", score(i % 10 != 0)), _vote("judge_b", score(i % 20 < 11))]
        route = ("route", "audit", "audit of auto_accept; mean 8") if i % 8 == 0 else None
        records.append(
            _row(i, "accept" if expert else "reject", votes, **({"route": route} if route else {}))
        )
    return from_records(records)


@dg.asset(name="curated_samples")
def _curated_samples() -> pa.Table:
    return _curated()


def test_publish_stores_the_calibration_and_the_panel_uses_it(
    home: Path, tmp_path: Path, tiny_model: Path
) -> None:
    from ptfactory.assets.datasets import sft_dataset
    from ptfactory.assets.resources import EnginesResource, PanelResource, SettingsResource, factory_resources

    config = tmp_path / "factory.yaml"
    config.write_text(
        f"engines:\n  generator: {{model: {tiny_model}}}\n"
        "judges:\n  - {name: execution, type: execution}\n"
        "judging: {calibration_min_labels: 10}\n"
    )
    factory = PanelResource(
        engines=EnginesResource(settings=SettingsResource(home=str(home), config_path=str(config)))
    )
    assert factory.panel().weights is None  # nothing published: equal weights

    result = dg.materialize(
        [_curated_samples, sft_dataset], resources=factory_resources(str(config), str(home))
    )
    assert result.success
    meta = result.asset_materializations_for_node("sft_dataset")[0].metadata
    assert meta["dagster/row_count"].value == 20  # the accepted half; rejects are not published
    assert meta["calibration_labels"].value == 40  # ...but they are labels
    assert "judge_a" in meta["calibration"].value

    stats = DatasetStore(str(home)).manifest("sft", 1).stats
    cal = Calibration.from_stats(stats["calibration"])
    assert cal.accuracy == {"judge_a": 0.9, "judge_b": 0.55}
    assert cal.weights is not None and cal.weights["judge_a"] > 5 * cal.weights["judge_b"]
    assert cal.audit is not None and cal.audit.rows == 5
    # the manifest is a report: the next panel reads weights from the calibration store, by identity
    assert factory.panel().weights is None

    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env.update({"PTF_HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1"})
    shown = subprocess.run(
        [sys.executable, "-m", "ptfactory", "datasets", "show", "sft@latest"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    text = shown.stdout
    assert "judge calibration" in text and "40 expert labels" in text
    assert "audit rows   5" in text
    line = next(ln for ln in text.splitlines() if "judge_a" in ln)
    assert f"{cal.weights['judge_a']:.3f}" in line and "0.900" in line
