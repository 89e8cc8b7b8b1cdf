"""A panel of judges (PoLL: Verga et al., 2024, "Replacing Judges with Juries"): several small,
different judges score every row; the aggregate is their (optionally reliability-weighted) mean,
median and spread, and Krippendorff's alpha says how far the panel agrees on a batch.

A judge that counts fewer than ``min_counted_share`` of the votes it tried on a batch is left out
of that batch's aggregate (its votes stay on the rows, marked by the report); a judge whose
counted scores never vary carries no information and is left out of alpha.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import krippendorff
import numpy as np
import pyarrow as pa

from ptfactory.annotators.judges.base import Judge, Vote
from ptfactory.storage.schema import add_decision, live_rows, set_score

__all__ = ["Aggregate", "Panel", "PanelReport", "aggregate", "judged_rows", "krippendorff_alpha"]

STAGE = "judge"


@dataclass(frozen=True)
class Aggregate:
    mean: float | None
    median: float | None
    spread: float | None  # max - min of the counted scores
    counted: int
    confidence: float | None = None  # mean confidence of the counted votes that state one (LLM votes)


def aggregate(
    votes: Sequence[Vote], weights: Mapping[str, float] | None = None, leave_out: frozenset[str] = frozenset()
) -> Aggregate:
    """Mean (weighted by ``weights[judge]`` where given), median and spread of the votes that count
    (parsed, not abstaining, judge not in ``leave_out``)."""
    counted = [v for v in votes if v.counts and v.score is not None and v.judge not in leave_out]
    if not counted:
        return Aggregate(None, None, None, 0)
    scores = [float(v.score) for v in counted if v.score is not None]
    w = [max(float((weights or {}).get(v.judge, 1.0)), 0.0) for v in counted]
    mean = (
        sum(s * x for s, x in zip(scores, w, strict=True)) / sum(w)
        if sum(w) > 0
        else statistics.fmean(scores)
    )
    confidences = [v.confidence for v in counted if v.confidence is not None]
    return Aggregate(
        round(mean, 4),
        round(statistics.median(scores), 4),
        round(max(scores) - min(scores), 4),
        len(scores),
        round(statistics.fmean(confidences), 4) if confidences else None,
    )


def krippendorff_alpha(matrix: np.ndarray) -> float | None:
    """Interval alpha over a judges × rows matrix (NaN where a judge gave no counted score)."""
    usable = matrix[:, np.sum(~np.isnan(matrix), axis=0) >= 2]
    if usable.shape[0] < 2 or usable.shape[1] < 2 or np.nanvar(usable) == 0:
        return None
    return float(krippendorff.alpha(reliability_data=usable, level_of_measurement="interval"))


def judged_rows(table: pa.Table) -> list[int]:
    """The rows the panel scores: every live row, and code rows dropped for failing their tests
    (judged so the execution vote is graded over passes and failures and pass-over-fail pairs can
    be built; they keep their drop, so they never reach SFT)."""
    live = set(live_rows(table))
    kinds = table.column("kind").to_pylist()
    scores = table.column("scores").to_pylist()
    return [
        i
        for i in range(table.num_rows)
        if i in live or (kinds[i] == "code" and (scores[i] or {}).get("execution") is not None)
    ]


@dataclass
class PanelReport:
    """What the panel learned about itself on one batch."""

    alpha: float | None = None
    counted_share: dict[str, float | None] = field(default_factory=dict)  # per judge
    left_out: list[str] = field(default_factory=list)  # under min_counted_share: not in the aggregate
    constant: list[str] = field(default_factory=list)  # zero variance: no information, not in alpha


@dataclass
class Panel:
    judges: list[Judge]
    min_counted_share: float = 0.95
    weights: dict[str, float] | None = None  # reliability weights (calibration); None: equal

    def vote(self, rows: list[dict[str, object]]) -> list[list[Vote]]:
        """votes[row][judge]."""
        by_judge = [judge.judge(rows) for judge in self.judges]
        return [list(row_votes) for row_votes in zip(*by_judge, strict=True)] if rows else []

    def assess(self, votes: list[list[Vote]]) -> PanelReport:
        """Per-judge counted share, who is left out of the aggregate, who is constant, and alpha."""
        report = PanelReport()
        matrix = np.full((len(self.judges), len(votes)), np.nan)
        for column, row_votes in enumerate(votes):
            for j, vote in enumerate(row_votes):
                if vote.counts and vote.score is not None:
                    matrix[j, column] = vote.score
        informative = []
        for j, judge in enumerate(self.judges):
            tried = [row[j] for row in votes if not (row[j].parsed and row[j].score is None)]
            share = sum(1 for v in tried if v.counts) / len(tried) if tried else None
            report.counted_share[judge.name] = round(share, 4) if share is not None else None
            if share is not None and share < self.min_counted_share:
                report.left_out.append(judge.name)
            counted = matrix[j][~np.isnan(matrix[j])]
            if len(counted) >= 2 and float(np.ptp(counted)) == 0.0:
                report.constant.append(judge.name)
            elif judge.name not in report.left_out:
                informative.append(j)
        report.alpha = krippendorff_alpha(matrix[informative]) if informative else None
        return report

    def judge_table(self, table: pa.Table) -> tuple[pa.Table, PanelReport]:
        """Every row back; judged rows get ``scores.judges`` and the aggregates; live rows get a
        ``judge`` decision (``keep``: the routing stage decides)."""
        rows = table.to_pylist()
        judged = judged_rows(table)
        live = set(live_rows(table))
        votes = self.vote([rows[i] for i in judged])
        report = self.assess(votes)
        leave_out = frozenset(report.left_out)
        old = [r["scores"] or {} for r in rows]
        columns: dict[str, list[object]] = {
            name: [s.get(name) for s in old]
            for name in ("judges", "judge_mean", "judge_median", "judge_spread", "judge_confidence")
        }
        decided, reasons, details = [], [], []
        for i, row_votes in zip(judged, votes, strict=True):
            agg = aggregate(row_votes, self.weights, leave_out)
            columns["judges"][i] = [v.to_dict() for v in row_votes]
            columns["judge_mean"][i], columns["judge_median"][i] = agg.mean, agg.median
            columns["judge_spread"][i], columns["judge_confidence"][i] = agg.spread, agg.confidence
            if i not in live:
                continue
            unparsed = sum(1 for v in row_votes if not v.parsed)
            decided.append(i)
            reasons.append("scored" if agg.counted else "no_counted_votes")
            details.append(
                f"{agg.counted} counted, {unparsed} unparsed"
                + (f", mean {agg.mean}" if agg.mean is not None else "")
                + (f"; left out: {', '.join(sorted(leave_out))}" if leave_out else "")
            )
        out = table
        for name, values in columns.items():
            out = set_score(out, name, values)
        merged = add_decision(out, STAGE, ["keep"] * len(decided), reasons, details, rows=decided)
        return merged, report
