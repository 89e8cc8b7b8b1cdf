"""Judge calibration from expert labels: how each judge separates the experts' accepts from their
rejects, where its cut and centre belong, the weight it earns, and how far the panel agrees.

**What counts as a label.** An SFT or code row an expert decided in review (the ``review`` decision
curation appends): ``accept`` is accept; ``reject`` is reject; ``edit`` (a corrected response) is
*reject* — the judges scored the original response, and the expert found it not acceptable as it
was. Preference rows and A/B choices are left out: they rank two answers, they grade neither.
Verifier votes are left out: verifiers are never weighed, they are labels themselves.

**Which votes.** A judge is fitted only on votes cast under its current identity (each vote records
its judge's identity key): swap the model behind a name and its old votes calibrate nothing.

**Selection.** Each label carries the inverse of its probability of being reviewed
(:mod:`~ptfactory.annotators.judges.calibration_fit`): audit rows (an unbiased sample of the
automatic verdicts) weigh ``1 / p``; disputed rows weigh ``disputed / reviewed`` of their batch.
``audit`` reports the agreement on audit rows alone (the unbiased estimate).

**Fits and weights.** Per judge: weighted AUC, the cut (and the centre of a likelihood judge), and
the weight ``2 * AUC - 1`` (annotators/judges/weights.py). Under ``min_labels`` labels the report
keeps its accuracies but ``weights`` is None and :func:`store_calibration` writes nothing: too few
labels to move a decision. The panel reads fits from the calibration store, never from a manifest.

**Accuracy and kappa** (reported): a counted vote is an accept at ``score >= 6``
(:data:`JUDGE_ACCEPT_AT`); the panel's verdict is ``judge_mean >= routing.accept_at``. Cohen's kappa
is the two-class formula (checked against scikit-learn in the tests).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ptfactory.annotators.judges.calibration_fit import fit_scores
from ptfactory.annotators.judges.calibration_store import CalibrationStore
from ptfactory.annotators.judges.likelihood import LIKELIHOOD_METHODS
from ptfactory.annotators.judges.llm import ACCEPT_AT
from ptfactory.storage.schema import audited_verdict, conform

__all__ = [
    "JUDGE_ACCEPT_AT",
    "STATS_KEY",
    "Agreement",
    "Calibration",
    "Example",
    "calibrate",
    "cohen_kappa",
    "examples",
    "store_calibration",
]

JUDGE_ACCEPT_AT = ACCEPT_AT  # a counted vote at or above this score is an accept
STATS_KEY = "calibration"  # where a dataset version's manifest stats keep the report
EXPERT_VERDICT = {"accept": True, "reject": False, "edit": False}
_DIGITS = 4
_P = re.compile(r"\bp=([0-9.]+)")
_DISPUTED = ("needs_review", "waited_too_long")


@dataclass(frozen=True)
class Example:
    """One labelled row: the expert's verdict and what the judges said about the same response."""

    expert: bool  # accept
    votes: dict[str, float]  # judge -> counted score
    judge_mean: float | None
    audit: bool  # an audit row: drawn at random from the automatic verdicts
    weight: float = 1.0  # 1 / P(reviewed): the selection correction
    identity: dict[str, str] = field(default_factory=dict)  # judge -> identity key of its vote
    statistic: dict[str, float] = field(default_factory=dict)  # likelihood votes: the Min-K% statistic


def _route(trail: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    return next((d for d in reversed(trail or []) if d["stage"] == "route"), None)


def _review_share(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per batch: reviewed disputed rows / all disputed rows (reviewed + still waiting) present."""
    reviewed: dict[str, int] = {}
    waiting: dict[str, int] = {}
    for row in rows:
        last = _route(row["decisions"])
        if last is None:
            continue
        if last["reason"] in _DISPUTED:
            reviewed[row["batch"]] = reviewed.get(row["batch"], 0) + 1
        elif last["reason"] == "waiting":
            waiting[row["batch"]] = waiting.get(row["batch"], 0) + 1
    return {b: n / (n + waiting.get(b, 0)) for b, n in reviewed.items()}


def _selection_weight(row: dict[str, Any], share: Mapping[str, float], audit_rate: float | None) -> float:
    last = _route(row["decisions"])
    if last is None:
        return 1.0
    if audited_verdict(row["decisions"]) is not None:
        found = _P.search(str(last.get("detail") or ""))
        p = float(found.group(1)) if found else (audit_rate or 1.0)
        return 1.0 / p if p > 0 else 1.0
    p = share.get(row["batch"], 1.0) if last["reason"] in _DISPUTED else 1.0
    return 1.0 / p if p > 0 else 1.0


def examples(table: pa.Table, audit_rate: float | None = None) -> list[Example]:
    """The labelled SFT/code rows of ``table`` (curated samples) with a counted judge vote, one per
    sample, each weighted by its selection correction (``audit_rate``: for audit rows whose routing
    detail does not state its draw probability)."""
    if table.num_rows == 0:
        return []
    rows = (
        conform(table).select(["sample_id", "batch", "kind", "scores", "decisions", "annotation"]).to_pylist()
    )
    share = _review_share(rows)
    # one label per sample: the last copy an expert decided (the review queue keeps one copy per
    # row; a later decision on the same sample replaces an earlier one)
    decided: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["kind"] == "preference" or (row["annotation"] or {}).get("preference"):
            continue
        review = [d for d in row["decisions"] or [] if d["stage"] == "review"]
        if review and review[-1]["verdict"] in EXPERT_VERDICT:
            decided[row["sample_id"]] = row
    out = []
    for row in decided.values():
        review = [d for d in row["decisions"] or [] if d["stage"] == "review"]
        scores = row["scores"] or {}
        counted = [
            v
            for v in scores.get("judges") or []
            if v["parsed"] and v["score"] is not None and v.get("method") != "verifier"
        ]
        if not counted:
            continue  # nothing to calibrate against
        statistic = {}
        for v in counted:
            if v.get("method") in LIKELIHOOD_METHODS:
                try:
                    statistic[v["judge"]] = float(v.get("raw") or "")
                except ValueError:
                    pass
        out.append(
            Example(
                EXPERT_VERDICT[review[-1]["verdict"]],
                {v["judge"]: float(v["score"]) for v in counted},
                scores.get("judge_mean"),
                audited_verdict(row["decisions"]) is not None,
                _selection_weight(row, share, audit_rate),
                {v["judge"]: v.get("identity") or "" for v in counted},
                statistic,
            )
        )
    return out


def cohen_kappa(a: list[bool], b: list[bool]) -> float | None:
    """Cohen's kappa of two binary raters; None when undefined (no rows, or chance agreement is 1)."""
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa_, pb = sum(a) / n, sum(b) / n
    chance = pa_ * pb + (1 - pa_) * (1 - pb)
    if chance >= 1.0:
        return None
    return round((observed - chance) / (1 - chance), _DIGITS)


def _calls(rows: list[Example], judge: str) -> tuple[list[bool], list[bool]]:
    """(the judge's accept calls, the experts' verdicts) on the rows it gave a counted vote."""
    voted = [ex for ex in rows if judge in ex.votes]
    return [ex.votes[judge] >= JUDGE_ACCEPT_AT for ex in voted], [ex.expert for ex in voted]


def _accuracy(a: list[bool], b: list[bool]) -> float | None:
    return round(sum(x == y for x, y in zip(a, b, strict=True)) / len(a), _DIGITS) if a else None


@dataclass(frozen=True)
class Agreement:
    """The panel's and each judge's agreement with the experts on a set of labelled rows."""

    rows: int
    accuracy: dict[str, float]  # judge -> share of its counted votes that matched the expert
    kappa: dict[str, float | None]
    votes: dict[str, int]  # judge -> counted votes on these rows
    panel_accuracy: float | None  # judge_mean >= accept_at vs the expert, rows with a mean
    panel_kappa: float | None

    @classmethod
    def of(cls, rows: list[Example], accept_at: float) -> Agreement:
        accuracy: dict[str, float] = {}
        kappa: dict[str, float | None] = {}
        votes: dict[str, int] = {}
        for judge in sorted({j for ex in rows for j in ex.votes}):
            said, truth = _calls(rows, judge)
            accuracy[judge] = _accuracy(said, truth) or 0.0  # said is never empty here
            kappa[judge] = cohen_kappa(said, truth)
            votes[judge] = len(said)
        meaned = [ex for ex in rows if ex.judge_mean is not None]
        panel = [ex.judge_mean is not None and ex.judge_mean >= accept_at for ex in meaned]
        truth = [ex.expert for ex in meaned]
        return cls(len(rows), accuracy, kappa, votes, _accuracy(panel, truth), cohen_kappa(panel, truth))

    def to_stats(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "panel": {"accuracy": self.panel_accuracy, "kappa": self.panel_kappa},
            "judges": {
                j: {"votes": self.votes[j], "accuracy": self.accuracy[j], "kappa": self.kappa[j]}
                for j in self.accuracy
            },
        }

    @classmethod
    def from_stats(cls, body: Mapping[str, Any]) -> Agreement:
        judges: Mapping[str, Mapping[str, Any]] = body.get("judges") or {}
        panel = body.get("panel") or {}
        return cls(
            int(body.get("rows") or 0),
            {j: float(s["accuracy"]) for j, s in judges.items()},
            {j: s.get("kappa") for j, s in judges.items()},
            {j: int(s.get("votes") or 0) for j, s in judges.items()},
            panel.get("accuracy"),
            panel.get("kappa"),
        )


@dataclass(frozen=True)
class Calibration:
    """What expert labels say about the judges: the fits the store keeps, and the agreement report a
    dataset version's manifest keeps (history, never read back into a panel)."""

    labels: int  # labelled rows with at least one counted vote
    weights: dict[str, float] | None  # fitted weights (2 AUC - 1); None: too few labels to fit
    accuracy: dict[str, float]
    kappa: dict[str, float | None]
    panel_accuracy: float | None
    panel_kappa: float | None
    audit: Agreement | None = None  # the audit rows alone: the unbiased estimate
    votes: dict[str, int] = field(default_factory=dict)
    fits: dict[str, dict[str, Any]] = field(default_factory=dict)  # judge -> fit (identity, auc, cut...)
    min_labels: int = 0
    accept_at: float = 7.0  # the panel verdict's threshold on the judge mean

    def rows(self) -> list[dict[str, Any]]:
        """Per judge: votes, accuracy, kappa, AUC, cut, centre and the fitted weight (None: not fitted)."""
        return [
            {
                "judge": j,
                "votes": self.votes.get(j, 0),
                "accuracy": self.accuracy[j],
                "kappa": self.kappa.get(j),
                "auc": (self.fits.get(j) or {}).get("auc"),
                "cut": (self.fits.get(j) or {}).get("cut"),
                "centre": (self.fits.get(j) or {}).get("centre"),
                "weight": (self.weights or {}).get(j),
            }
            for j in sorted(self.accuracy)
        ]

    def to_stats(self) -> dict[str, Any]:
        """JSON-safe; :meth:`from_stats` reads it back."""
        return {
            "labels": self.labels,
            "min_labels": self.min_labels,
            "weights": self.weights,
            "panel": {
                "accuracy": self.panel_accuracy,
                "kappa": self.panel_kappa,
                "accept_at": self.accept_at,
            },
            "judge_accept_at": JUDGE_ACCEPT_AT,
            "judges": {r["judge"]: {k: r[k] for k in ("votes", "accuracy", "kappa")} for r in self.rows()},
            "fits": self.fits,
            "audit": self.audit.to_stats() if self.audit is not None else None,
        }

    @classmethod
    def from_stats(cls, body: Mapping[str, Any]) -> Calibration:
        judges: Mapping[str, Mapping[str, Any]] = body.get("judges") or {}
        panel = body.get("panel") or {}
        weights = body.get("weights")
        return cls(
            labels=int(body.get("labels") or 0),
            weights={j: float(w) for j, w in weights.items()} if weights is not None else None,
            accuracy={j: float(s["accuracy"]) for j, s in judges.items()},
            kappa={j: s.get("kappa") for j, s in judges.items()},
            panel_accuracy=panel.get("accuracy"),
            panel_kappa=panel.get("kappa"),
            audit=Agreement.from_stats(body["audit"]) if body.get("audit") else None,
            votes={j: int(s.get("votes") or 0) for j, s in judges.items()},
            fits={j: dict(f) for j, f in (body.get("fits") or {}).items()},
            min_labels=int(body.get("min_labels") or 0),
            accept_at=float(panel.get("accept_at", 7.0)),
        )


def _fit(rows: list[Example], judge: str) -> dict[str, Any] | None:
    """The judge's fit on the votes of its most recent identity (the one on the most labels when
    several: a judge changed mid-way is fitted on one identity's votes only)."""
    voted = [ex for ex in rows if judge in ex.votes]
    keys: dict[str, int] = {}
    for ex in voted:
        keys[ex.identity.get(judge, "")] = keys.get(ex.identity.get(judge, ""), 0) + 1
    key = max(keys, key=lambda k: keys[k]) if keys else ""
    mine = [ex for ex in voted if ex.identity.get(judge, "") == key]
    likelihood = all(judge in ex.statistic for ex in mine)
    fit = fit_scores(
        [ex.votes[judge] for ex in mine],
        [ex.expert for ex in mine],
        [ex.weight for ex in mine],
        statistics=[ex.statistic.get(judge) for ex in mine] if likelihood else None,
    )
    return {**fit, "identity": key} if fit is not None else None


def calibrate(
    labelled: Iterable[Example] | pa.Table, min_labels: int, accept_at: float, audit_rate: float | None = None
) -> Calibration:
    """Fit each judge on labelled rows (a curated table or examples) and report the agreement."""
    rows = examples(labelled, audit_rate) if isinstance(labelled, pa.Table) else list(labelled)
    overall = Agreement.of(rows, accept_at)
    fits = {judge: fit for judge in overall.votes if (fit := _fit(rows, judge)) is not None}
    audited = [ex for ex in rows if ex.audit]
    enough = len(rows) >= min_labels
    return Calibration(
        labels=len(rows),
        weights={j: float(f["weight"]) for j, f in sorted(fits.items())} if enough and fits else None,
        accuracy=overall.accuracy,
        kappa=overall.kappa,
        panel_accuracy=overall.panel_accuracy,
        panel_kappa=overall.panel_kappa,
        audit=Agreement.of(audited, accept_at) if audited else None,
        votes=overall.votes,
        fits=fits,
        min_labels=min_labels,
        accept_at=accept_at,
    )


def store_calibration(
    calibration: Calibration,
    store: CalibrationStore,
    identities: Mapping[str, tuple[str, Mapping[str, Any]]],
) -> list[str]:
    """Write each judge's fit into ``store`` when there are enough labels and the fit was made on
    votes of the judge's current identity (``identities``: name -> (key, identity), what
    :meth:`Panel.identities <ptfactory.annotators.judges.panel.Panel.identities>` gives). Returns
    the judges written; a judge whose identity changed since its labels is left unfitted (reset)."""
    if calibration.weights is None:
        return []
    written = []
    for name, fit in sorted(calibration.fits.items()):
        current = identities.get(name)
        if current is None or fit.get("identity") != current[0]:
            continue
        store.put_fit(name, current[0], current[1], {k: v for k, v in fit.items() if k != "identity"})
        written.append(name)
    return written
