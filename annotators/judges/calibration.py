"""Judge calibration from expert labels: how reliable each judge is, the weights the panel's mean
should give them, and how far the panel and each judge agree with the experts.

**What counts as a label.** An SFT or code row an expert decided in review (the ``review`` decision
curation appends): ``accept`` is accept; ``reject`` is reject; ``edit`` (a corrected response) is
*reject* — the judges scored the original response, and the expert found it not acceptable as it
was. Preference rows and A/B choices are left out: they rank two answers, they grade neither.

**Votes.** A judge's counted vote (parsed, with a score) is an accept at ``score >= 6``
(:data:`JUDGE_ACCEPT_AT`, the LLM judge's own cutoff when a reply gives no verdict). One fixed cut
for every judge, not each judge's own verdict, and not a threshold-free AUC: the panel averages
*scores* and routing compares that mean with fixed bands, so a judge whose scores rank well but sit
on the wrong side of the scale still misleads the mean, and the fixed cut counts that against it.
The *panel's* verdict is ``judge_mean >=
routing.accept_at``: what routing auto-accepts on, so its accuracy is the accuracy of the rule the
factory applies (and matches ``judge_human_agreement`` on ``curated_samples``).

**Reliability and weights (the choice).** With the experts' labels known there is nothing to infer
about the truth, so the one-coin Dawid–Skene reliability of a judge is simply its accuracy against
the experts; it is smoothed with a Beta(1, 1) prior (Laplace: ``(correct + 1) / (votes + 2)``) so
that a judge seen on three rows is not declared perfect. For independent voters of accuracy ``p``
the weighted vote that is most often right gives each the log-odds ``log(p / (1 - p))``
(Nitzan & Paroush, 1982; the weighted mean of scores is that weighted vote's analogue); a judge no better than chance gets 0 (clamped: a negative weight would
make the weighted *mean* of scores meaningless). The fitted weights are scaled to mean 1, so a
judge with no counted vote on a labelled row — weight 1, the panel's default — counts as much as
the average fitted judge. If no judge beats chance the weights are None (equal): weighting cannot
help. crowd-kit's ``accuracy_on_aggregates(answers, aggregates=gold, by="worker")`` computes the
same accuracies, but importing it costs seconds (it pulls in transformers) for one count per
judge, and its Dawid–Skene EM is for when the truth is unknown, which here it is not. Cohen's kappa
is the two-class formula (checked against scikit-learn's ``cohen_kappa_score`` in the tests).

**Too few labels.** Under ``judging.calibration_min_labels`` labelled rows the weights are None
and the panel weights its judges equally; the accuracies are still reported.

**Audit rows** (routing reason ``audit``) are a random sample of the automatic verdicts, unlike the
disputed rows the budget sent to review; agreement on them alone is the unbiased estimate of how
the panel does on the rows it decides by itself (``audit``; None when no audit row was labelled).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ptfactory.annotators.judges.llm import ACCEPT_AT
from ptfactory.storage.schema import audited_verdict, conform, latest_copies
from ptfactory.storage.versions import DatasetStore

__all__ = [
    "JUDGE_ACCEPT_AT",
    "STATS_KEY",
    "Agreement",
    "Calibration",
    "Example",
    "calibrate",
    "cohen_kappa",
    "examples",
    "latest_stats",
    "log_odds_weights",
    "weights_for",
]

JUDGE_ACCEPT_AT = ACCEPT_AT  # a counted vote at or above this score is an accept
STATS_KEY = "calibration"  # where a dataset version's manifest stats keep it
# the expert's verdict on the response the judges scored, by the review decision's verdict
EXPERT_VERDICT = {"accept": True, "reject": False, "edit": False}
_DIGITS = 4


@dataclass(frozen=True)
class Example:
    """One labelled row: the expert's verdict and what the judges said about the same response."""

    expert: bool  # accept
    votes: dict[str, float]  # judge -> counted score
    judge_mean: float | None
    audit: bool  # an audit row: drawn at random from the automatic verdicts


def examples(table: pa.Table) -> list[Example]:
    """The labelled SFT/code rows of ``table`` (curated samples) with a counted vote, one per sample."""
    if table.num_rows == 0:
        return []
    rows = latest_copies(conform(table)).select(["sample_id", "kind", "scores", "decisions", "annotation"])
    out, seen = [], set()
    for row in rows.to_pylist():
        if row["kind"] == "preference" or (row["annotation"] or {}).get("preference"):
            continue
        review = [d for d in row["decisions"] or [] if d["stage"] == "review"]
        if not review or review[-1]["verdict"] not in EXPERT_VERDICT or row["sample_id"] in seen:
            continue
        scores = row["scores"] or {}
        votes = {
            v["judge"]: float(v["score"])
            for v in scores.get("judges") or []
            if v["parsed"] and v["score"] is not None
        }
        if not votes:
            continue  # nothing to calibrate against
        seen.add(row["sample_id"])
        out.append(
            Example(
                EXPERT_VERDICT[review[-1]["verdict"]],
                votes,
                scores.get("judge_mean"),
                audited_verdict(row["decisions"]) is not None,
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


def log_odds_weights(reliability: Mapping[str, float]) -> dict[str, float] | None:
    """Nitzan–Paroush weights ``log(p / (1 - p))``, clamped at 0, scaled to mean 1; None when no
    judge beats chance (see the module docstring)."""
    raw = {j: max(0.0, math.log(p / (1.0 - p))) for j, p in reliability.items()}
    mean = sum(raw.values()) / len(raw) if raw else 0.0
    if mean <= 0:
        return None
    return {j: round(w / mean, _DIGITS) for j, w in sorted(raw.items())}


@dataclass(frozen=True)
class Calibration:
    """What a dataset version's expert labels say about the judges (stored in its manifest stats)."""

    labels: int  # labelled rows with at least one counted vote
    weights: dict[str, float] | None  # for Panel(weights=...); None: equal (too few labels)
    accuracy: dict[str, float]
    kappa: dict[str, float | None]
    panel_accuracy: float | None
    panel_kappa: float | None
    audit: Agreement | None = None  # the audit rows alone: the unbiased estimate
    votes: dict[str, int] = field(default_factory=dict)
    reliability: dict[str, float] = field(default_factory=dict)  # Laplace-smoothed accuracy
    min_labels: int = 0
    accept_at: float = 7.0  # the panel verdict's threshold on the judge mean

    def rows(self) -> list[dict[str, Any]]:
        """Per judge: votes, accuracy, kappa, reliability and the weight the panel applies (1: equal)."""
        return [
            {
                "judge": j,
                "votes": self.votes.get(j, 0),
                "accuracy": self.accuracy[j],
                "kappa": self.kappa.get(j),
                "reliability": self.reliability.get(j),
                "weight": (self.weights or {}).get(j, 1.0),
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
            "judges": {
                r["judge"]: {k: r[k] for k in ("votes", "accuracy", "kappa", "reliability")}
                for r in self.rows()
            },
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
            reliability={
                j: float(s["reliability"]) for j, s in judges.items() if s.get("reliability") is not None
            },
            min_labels=int(body.get("min_labels") or 0),
            accept_at=float(panel.get("accept_at", 7.0)),
        )


def calibrate(labelled: Iterable[Example] | pa.Table, min_labels: int, accept_at: float) -> Calibration:
    """Fit the judges' reliabilities and weights on labelled rows (a curated table or examples)."""
    rows = examples(labelled) if isinstance(labelled, pa.Table) else list(labelled)
    overall = Agreement.of(rows, accept_at)
    reliability = {}
    for judge in overall.votes:
        said, truth = _calls(rows, judge)
        correct = sum(x == y for x, y in zip(said, truth, strict=True))
        reliability[judge] = round((correct + 1) / (len(said) + 2), _DIGITS)  # Beta(1, 1) posterior mean
    audited = [ex for ex in rows if ex.audit]
    return Calibration(
        labels=len(rows),
        weights=log_odds_weights(reliability) if len(rows) >= min_labels else None,
        accuracy=overall.accuracy,
        kappa=overall.kappa,
        panel_accuracy=overall.panel_accuracy,
        panel_kappa=overall.panel_kappa,
        audit=Agreement.of(audited, accept_at) if audited else None,
        votes=overall.votes,
        reliability=reliability,
        min_labels=min_labels,
        accept_at=accept_at,
    )


def weights_for(stats: Mapping[str, Any] | None, min_labels: int) -> dict[str, float] | None:
    """The panel's weights from a dataset version's manifest ``stats``: None (equal weights) when it
    has no calibration or fewer than ``min_labels`` labels; recomputed from the stored reliabilities,
    so the minimum in force now applies, not the one of the run that published the version."""
    body = (stats or {}).get(STATS_KEY)
    if not body:
        return None
    calibration = Calibration.from_stats(body)
    if calibration.labels < min_labels:
        return None
    return log_odds_weights(calibration.reliability)


def latest_stats(store: DatasetStore, name: str) -> dict[str, Any] | None:
    """The manifest stats of ``name``'s latest version; None when none is published."""
    versions = store.versions(name)
    return store.manifest(name, versions[-1]).stats if versions else None
