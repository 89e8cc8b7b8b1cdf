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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.judges.base import Judge, Vote
from ptfactory.storage.schema import add_decision, dropped_mask, live_rows, set_score

__all__ = [
    "Aggregate",
    "Panel",
    "PanelReport",
    "aggregate",
    "judged_rows",
    "krippendorff_alpha",
    "means_by_drop_reason",
]

STAGE = "judge"
DIFFICULTY_STAGE = "difficulty"


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
    """Interval alpha over a judges × rows matrix (NaN where a judge gave no counted score).

    In closed form, O(judges × rows): the squared differences of all pairs of values within a
    row, and over all pairable values, come from sums and sums of squares. The ``krippendorff``
    package builds a rows × values × values array, and LLM scores are continuous: at 5,000 rows
    of likelihood votes that is tens of GiB. Same value as the package (tested against it).
    """
    usable = matrix[:, np.sum(~np.isnan(matrix), axis=0) >= 2]
    if usable.shape[0] < 2 or usable.shape[1] < 2 or np.nanvar(usable) == 0:
        return None
    present = ~np.isnan(usable)
    values = np.where(present, usable, 0.0)
    m = present.sum(axis=0).astype(np.float64)  # pairable values per row
    s1, s2 = values.sum(axis=0), (values * values).sum(axis=0)
    n = float(m.sum())
    # sum over ordered pairs i != j of (v_i - v_j)^2 = 2 (m * sum v^2 - (sum v)^2)
    observed = float(np.sum(2 * (m * s2 - s1 * s1) / (m - 1))) / n
    expected = 2 * (n * float(s2.sum()) - float(s1.sum()) ** 2) / (n * (n - 1))
    return 1.0 - observed / expected if expected > 0 else None


def judged_rows(table: pa.Table) -> list[int]:
    """The rows the panel scores: every live row; code rows dropped for failing their tests (judged
    so the execution vote is graded over passes and failures and pass-over-fail pairs can be
    built); and rows the difficulty stage dropped, so each difficulty reason can be checked
    against the panel (:func:`means_by_drop_reason`). Dropped rows keep their drop: they never
    reach SFT, routing or review."""
    live = pc.invert(dropped_mask(table))
    executed = pc.and_(
        pc.equal(table.column("kind"), "code").fill_null(False),
        pc.is_valid(pc.struct_field(table.column("scores"), "execution")),
    )
    judged = pc.or_(pc.or_(live, executed), _dropped_only_by(table, DIFFICULTY_STAGE))
    rows: list[int] = np.nonzero(judged.to_numpy(zero_copy_only=False))[0].tolist()
    return rows


def _drops(table: pa.Table) -> tuple[pa.Array, pa.Array]:
    """(row index, stage) of every drop decision."""
    decisions = table.column("decisions").combine_chunks()
    flat = pc.list_flatten(decisions)
    parents = pc.list_parent_indices(decisions)
    if len(flat) == 0:
        return parents, flat
    hit = pc.is_in(flat.field("verdict"), value_set=pa.array(["drop", "reject"])).fill_null(False)
    return pc.filter(parents, hit), pc.filter(flat, hit)


def _dropped_only_by(table: pa.Table, stage: str) -> pa.Array:
    """True for rows dropped by ``stage`` and by no earlier stage."""
    parents, drops = _drops(table)
    by = np.zeros(table.num_rows, dtype=np.int64)
    other = np.zeros(table.num_rows, dtype=np.int64)
    if len(drops):
        at_stage = pc.equal(drops.field("stage"), stage).fill_null(False).to_numpy(zero_copy_only=False)
        index = parents.to_numpy(zero_copy_only=False)
        np.add.at(by, index[at_stage], 1)
        np.add.at(other, index[~at_stage], 1)
    return pa.array((by > 0) & (other == 0), pa.bool_())


def means_by_drop_reason(
    table: pa.Table, stage: str = DIFFICULTY_STAGE
) -> dict[str, tuple[int, float | None]]:
    """Rows and mean judge mean per reason ``stage`` dropped rows for, and for the rows still live
    (``kept``): a gate that agrees with the panel drops rows the judges score lower."""
    means = pc.struct_field(table.column("scores").combine_chunks(), "judge_mean")
    groups: dict[str, list[float | None]] = {}
    only = _dropped_only_by(table, stage).to_numpy(zero_copy_only=False)
    live = pc.invert(dropped_mask(table)).to_numpy(zero_copy_only=False)
    trails = table.column("decisions").to_pylist()
    for index, mean in enumerate(means.to_pylist()):
        if live[index]:
            key = "kept"
        elif only[index]:
            key = next(d["reason"] for d in trails[index] if d["stage"] == stage and d["verdict"] == "drop")
        else:
            continue
        groups.setdefault(key, []).append(mean)
    out: dict[str, tuple[int, float | None]] = {}
    for key, values in sorted(groups.items()):
        scored = [float(v) for v in values if v is not None]
        out[key] = (len(values), round(statistics.fmean(scored), 4) if scored else None)
    return out


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
        judged = judged_rows(table)
        live = set(live_rows(table))
        # only the judged rows become Python dicts (the judges' interface); the rest stay in Arrow
        votes = self.vote(table.take(pa.array(judged, pa.int64())).to_pylist() if judged else [])
        report = self.assess(votes)
        leave_out = frozenset(report.left_out)
        columns: dict[str, list[object]] = {
            name: [] for name in ("judges", "judge_mean", "judge_median", "judge_spread", "judge_confidence")
        }
        decided, reasons, details = [], [], []
        for i, row_votes in zip(judged, votes, strict=True):
            agg = aggregate(row_votes, self.weights, leave_out)
            columns["judges"].append([v.to_dict() for v in row_votes])
            columns["judge_mean"].append(agg.mean)
            columns["judge_median"].append(agg.median)
            columns["judge_spread"].append(agg.spread)
            columns["judge_confidence"].append(agg.confidence)
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
            out = set_score(out, name, values, rows=judged)
        merged = add_decision(out, STAGE, ["keep"] * len(decided), reasons, details, rows=decided)
        return merged, report
