"""Calibration that moves decisions: expert labels (weighted by how they were selected) move a judge's
cut and a likelihood judge's centre, the fits live in a store keyed by judge identity, a changed
identity starts from nothing, and a judge the batch cannot measure uses what its identity earned."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ptfactory.annotators.judges import CalibrationStore, Judge, LLMJudge, Panel, Vote
from ptfactory.annotators.judges.calibration import calibrate, examples, store_calibration
from ptfactory.annotators.judges.calibration_fit import fit_scores, recentre
from ptfactory.annotators.judges.weights import JudgeWeight, judge_weight
from ptfactory.engines.base import Completion, Conversation, Engine, Prompt, SamplingParams, TokenLogprobs
from ptfactory.storage.schema import from_records, sample_id

ACCEPT_AT = 7.0


@dataclass
class Fixed(Judge):
    """Votes the score a row's text names (``score=7.5``); ``model`` names its weights."""

    weights: str = "w1"
    seen: list[str] = field(default_factory=list)

    @property
    def model(self) -> str:
        return f"fixed-{self.weights}"

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        out = []
        for row in rows:
            text = row["messages"][-1]["content"]
            self.seen.append(text)
            score = float(text.split("score=")[1].split()[0])
            out.append(
                Vote(self.name, self.model, score, "accept" if score >= 6 else "reject", method="json")
            )
        return out


def _row(
    i: int, score: float, review: str | None = None, route: tuple[str, str, str] | None = None
) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i} score={score}"}]
    trail = [{"stage": "judge", "verdict": "keep", "reason": "scored", "detail": None}]
    if route:
        trail.append({"stage": "route", "verdict": route[0], "reason": route[1], "detail": route[2]})
    if review:
        trail.append({"stage": "review", "verdict": review, "reason": f"human_{review}", "detail": None})
    return {"sample_id": sample_id("sft", messages), "batch": "b1", "kind": "sft", "messages": messages,
            "decisions": trail}  # fmt: skip


def test_expert_labels_move_a_judges_cut_and_the_panel_decides_with_it(tmp_path: Path) -> None:
    """The judge accepts what the experts accept from score 4 up, not 6: the fit moves its cut to 4,
    and a 5 it gives afterwards lands above the common accept line (6) in the panel's mean."""
    judge = Fixed("j")
    labelled = from_records([_row(i, s) for i, s in enumerate([1, 2, 3, 4.5, 5, 5.5, 8, 9, 2.5, 4.2] * 3)])
    judged, _ = Panel([judge]).judge_table(labelled)
    rows = judged.to_pylist()
    for row in rows:  # the experts accept what the judge scored 4 or more
        score = row["scores"]["judges"][0]["score"]
        row["decisions"].append(
            {"stage": "route", "verdict": "route", "reason": "needs_review", "detail": ""}
        )
        row["decisions"].append({"stage": "review", "verdict": "accept" if score >= 4 else "reject",
                                 "reason": "human", "detail": None})  # fmt: skip
    cal = calibrate(from_records(rows), min_labels=10, accept_at=ACCEPT_AT)
    assert cal.fits["j"]["cut"] == pytest.approx(3.6)  # between 3 and 4.2: the best separating cut
    assert cal.fits["j"]["auc"] == 1.0 and cal.weights == {"j": 1.0}
    store = CalibrationStore.under(tmp_path)
    panel = Panel([judge], store=store)
    assert store_calibration(cal, store, panel.identities()) == ["j"]

    fresh, _ = Panel([Fixed("j")]).judge_table(from_records([_row(100, 5.0), _row(101, 3.0)]))
    moved, report = panel.judge_table(from_records([_row(100, 5.0), _row(101, 3.0)]))
    assert [r["scores"]["judge_mean"] for r in fresh.to_pylist()] == [5.0, 3.0]  # raw: both under 6
    means = [r["scores"]["judge_mean"] for r in moved.to_pylist()]
    assert means[0] == pytest.approx(float(recentre(np.array([5.0]), 3.6)[0]), abs=1e-4) and means[0] > 6
    assert means[1] < 6
    assert report.weights["j"].source == "persisted" and report.weights["j"].weight == 1.0
    assert [r["scores"]["judges"][0]["score"] for r in moved.to_pylist()] == [5.0, 3.0]  # votes stay raw


def test_a_changed_identity_starts_from_nothing(tmp_path: Path) -> None:
    """The same judge name on other weights (or engine, method, prompt) is another identity: it finds
    no fit, gets weight 0 until it earns one, the store reports the reset, and fits made on the old
    identity's votes are not written for the new one."""
    store = CalibrationStore.under(tmp_path)
    old, new = Fixed("smollm2", weights="a"), Fixed("smollm2", weights="b")
    assert old.identity_key != new.identity_key
    store.put_fit(
        "smollm2", old.identity_key, old.identity(), {"auc": 0.9, "weight": 0.8, "labels": 40, "cut": 4.0}
    )
    assert store.persisted(old.identity_key) is not None
    assert store.persisted(new.identity_key) is None and store.cut(new.identity_key) is None
    table = from_records([_row(i, s) for i, s in enumerate([2.0, 8.0, 5.0])])
    _, report = Panel([new], store=store).judge_table(table)
    assert report.weights["smollm2"].source == "none" and report.weights["smollm2"].weight == 0.0
    assert report.resets == {"smollm2": old.identity_key}

    judged, _ = Panel([old]).judge_table(table)  # votes cast under the old identity, labelled later
    rows = judged.to_pylist()
    for row, verdict in zip(rows, ["reject", "accept", "accept"], strict=True):
        row["decisions"] += [{"stage": "route", "verdict": "route", "reason": "needs_review", "detail": ""},
                             {"stage": "review", "verdict": verdict, "reason": "human", "detail": None}]  # fmt: skip
    cal = calibrate(from_records(rows), min_labels=1, accept_at=ACCEPT_AT)
    assert store_calibration(cal, store, Panel([new]).identities()) == []  # not the current identity


def test_labels_are_weighted_by_how_they_were_selected() -> None:
    """An audit row stands for 1/p automatic verdicts; a disputed row for its batch's waiting ones."""
    audit = ("route", "audit", "audit of auto_accept; drawn with p=0.2500; mean 8")
    routes = [
        (8.0, "accept", audit),
        (2.0, "reject", ("route", "needs_review", "spread 4")),
        (3.0, "reject", ("route", "needs_review", "spread 3")),
        (5.0, None, ("wait", "waiting", "budget used")),
        (5.5, None, ("wait", "waiting", "budget used")),
    ]
    judged, _ = Panel([Fixed("j")]).judge_table(
        from_records([_row(i, s) for i, (s, _, _) in enumerate(routes)])
    )
    rows = judged.to_pylist()
    for row, (_, review, route) in zip(rows, routes, strict=True):
        row["decisions"].append(
            {"stage": "route", "verdict": route[0], "reason": route[1], "detail": route[2]}
        )
        if review:
            row["decisions"].append({"stage": "review", "verdict": review, "reason": "human", "detail": None})
    judged = from_records(rows)
    weights = {e.votes["j"]: e.weight for e in examples(judged)}
    assert weights == {8.0: 4.0, 2.0: 2.0, 3.0: 2.0}  # 1 / 0.25; 2 reviewed of 4 disputed
    assert examples(judged, audit_rate=0.5)[0].weight == 4.0  # the stated p wins over the rate


def test_the_fit_weighs_labels_by_selection() -> None:
    """Disputed rows alone make the judge look poor; weighted with the audit rows (what the batch
    really holds) its AUC is higher, and its cut follows the weighted labels."""
    scores = [9, 8, 8, 7, 3, 2, 6.5, 6, 5, 4.5]
    labels = [True, True, True, True, False, False, False, True, True, False]
    weights = [5, 5, 5, 5, 5, 5, 1, 1, 1, 1]  # audit rows (p = 0.2), then disputed rows
    unweighted = fit_scores(scores, labels, [1.0] * 10)
    weighted = fit_scores(scores, labels, weights)
    assert unweighted is not None and weighted is not None
    assert weighted["auc"] > unweighted["auc"]
    assert weighted["effective"] < 10


@dataclass
class Likely(Engine):
    """Scores a continuation by the number it carries: 'x=-2.5' gives every token -2.5."""

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        raise NotImplementedError

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        out = []
        for text in continuations:
            value = float(text.split("x=")[1].split()[0])
            out.append(TokenLogprobs(["t"] * 5, [value] * 5))
        return out


def test_a_likelihood_judges_centre_moves_with_its_fit(tmp_path: Path) -> None:
    """A likelihood judge is fitted on its Min-K% statistic: the centre (its score mapping's
    borderline point) moves to where the experts' labels split, and the judge scores from there."""
    statistics = [-6.0, -5.5, -5.0, -4.8, -2.0, -1.5, -1.0, -0.5] * 3
    fit = fit_scores(
        [1 + 9 / (1 + math.exp(-(x + 3.5))) for x in statistics],
        [x > -3 for x in statistics],
        [1.0] * len(statistics),
        statistics=statistics,
    )
    assert fit is not None and fit["centre"] == pytest.approx(-3.4) and fit["cut"] == 5.5
    judge = LLMJudge("lik", engine=Likely(model_id="m"), scoring="likelihood", likelihood_center=-3.5)
    store = CalibrationStore.under(tmp_path)
    store.put_fit("lik", judge.identity_key, judge.identity(), {**fit, "centre": -1.2})
    row = {"sample_id": "s", "batch": "b", "kind": "sft", "decisions": [],
           "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x=-1.2"}]}  # fmt: skip
    judged, _ = Panel([judge], store=store).judge_table(from_records([row]))
    assert judge.likelihood_center == -1.2
    assert judged.to_pylist()[0]["scores"]["judges"][0]["score"] == 5.5  # the new borderline


def test_a_batch_too_small_to_measure_uses_what_the_identity_earned(tmp_path: Path) -> None:
    """Fewer than 5 labelled rows of a class: the persisted weight of the identity, built from the
    batches it was measured on (a rerun replaces its own batch) and the expert fit."""
    store = CalibrationStore.under(tmp_path)
    judge = Fixed("j")
    ids = {"j": (judge.identity_key, judge.identity())}
    scores = np.array([9, 8, 7, 8, 9, 2, 3, 1, 2, 8.5])
    truth = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0], bool)  # one wrong answer the judge likes
    measured = judge_weight("j", scores, truth, None)
    assert measured.source == "batch" and measured.auc == 0.88 and measured.low is not None
    assert store.record_batch("b1", {"j": measured}, ids) == 1
    assert store.record_batch("b1", {"j": measured}, ids) == 1  # a rerun replaces b1's own entry
    assert len(store.entry(judge.identity_key)["batches"]) == 1  # type: ignore[index]
    persisted = store.persisted(judge.identity_key)
    assert persisted is not None and persisted.weight == 0.76  # 2 * 0.88 - 1
    small = judge_weight("j", scores[:3], truth[:3], persisted)
    assert (small.source, small.weight) == ("persisted", 0.76)
    assert judge_weight("j", scores[:3], truth[:3], None) == JudgeWeight("j", 0.0, "none", positives=3)
    bad = judge_weight("j", 11 - scores, truth, persisted)  # ranks wrong above right on this batch
    assert bad.flagged and bad.weight == 0.0
