"""annotators/judges/panel.py's ``judge_table`` (with ``assess``) and ``means_by_drop_reason``, and
the judging asset's choice of preference-candidate rows, before they worked on Arrow columns
(verbatim but for being functions of the panel)."""

from __future__ import annotations

import statistics

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.judges.base import Vote
from ptfactory.annotators.judges.panel import (
    STAGE,
    Panel,
    PanelReport,
    _dropped_only_by,
    aggregate,
    judged_rows,
    krippendorff_alpha,
)
from ptfactory.storage.schema import add_decision, dropped_mask, live_rows, set_score


def scored_sft(table: pa.Table) -> pa.Table:
    """What assets/judging.py handed ``preference_candidates`` (as rows): the live scored sft rows."""
    mask = pc.and_(
        pc.and_(pc.equal(table.column("kind"), "sft"), pc.invert(dropped_mask(table))),
        pc.is_valid(pc.struct_field(table.column("scores"), "judge_mean")),
    )
    return table.filter(pc.fill_null(mask, False))


def means_by_drop_reason(table: pa.Table, stage: str = "difficulty") -> dict[str, tuple[int, float | None]]:
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


def assess(self: Panel, votes: list[list[Vote]]) -> PanelReport:
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


def judge_table(self: Panel, table: pa.Table) -> tuple[pa.Table, PanelReport]:
    judged = judged_rows(table)
    live = set(live_rows(table))
    votes = self.vote(table.take(pa.array(judged, pa.int64())).to_pylist() if judged else [])
    report = assess(self, votes)
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
