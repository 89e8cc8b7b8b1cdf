"""A panel of judges (PoLL: Verga et al., 2024, "Replacing Judges with Juries"): several small,
different judges score every row; the aggregate is their mean, median and spread, and
Krippendorff's alpha says how far the panel agrees on a batch."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np
import pyarrow as pa

from ptfactory.annotators.judges.base import Judge, Vote
from ptfactory.storage.schema import add_decision, live_rows, set_score

__all__ = ["Aggregate", "Panel", "aggregate", "krippendorff_alpha"]

STAGE = "judge"


@dataclass(frozen=True)
class Aggregate:
    mean: float | None
    median: float | None
    spread: float | None  # max - min of the counted scores
    counted: int


def aggregate(votes: Sequence[Vote]) -> Aggregate:
    """Mean, median and spread of the votes that count (parsed, not abstaining)."""
    scores = [float(v.score) for v in votes if v.counts and v.score is not None]
    if not scores:
        return Aggregate(None, None, None, 0)
    return Aggregate(
        round(statistics.fmean(scores), 4),
        round(statistics.median(scores), 4),
        round(max(scores) - min(scores), 4),
        len(scores),
    )


def krippendorff_alpha(matrix: np.ndarray) -> float | None:
    """Interval alpha over a judges × rows matrix (NaN where a judge gave no counted score)."""
    usable = matrix[:, np.sum(~np.isnan(matrix), axis=0) >= 2]
    if usable.shape[0] < 2 or usable.shape[1] < 2 or np.nanvar(usable) == 0:
        return None
    return float(krippendorff.alpha(reliability_data=usable, level_of_measurement="interval"))


@dataclass
class Panel:
    judges: list[Judge]

    def vote(self, rows: list[dict[str, object]]) -> list[list[Vote]]:
        """votes[row][judge]."""
        by_judge = [judge.judge(rows) for judge in self.judges]
        return [list(row_votes) for row_votes in zip(*by_judge, strict=True)] if rows else []

    def judge_table(self, table: pa.Table) -> tuple[pa.Table, float | None]:
        """Every row back; live rows get ``scores.judges`` and the aggregates, and a ``judge`` decision
        (``keep``: the routing stage decides); returns the batch's Krippendorff alpha too."""
        rows = table.to_pylist()
        live = live_rows(table)
        votes = self.vote([rows[i] for i in live])
        judges_col: list[list[dict[str, object]] | None] = [
            (r["scores"] or {}).get("judges") if r["scores"] else None for r in rows
        ]
        means: list[float | None] = [
            (r["scores"] or {}).get("judge_mean") if r["scores"] else None for r in rows
        ]
        medians = [(r["scores"] or {}).get("judge_median") if r["scores"] else None for r in rows]
        spreads = [(r["scores"] or {}).get("judge_spread") if r["scores"] else None for r in rows]
        reasons, details = [], []
        matrix = np.full((len(self.judges), len(live)), np.nan)
        for column, (i, row_votes) in enumerate(zip(live, votes, strict=True)):
            agg = aggregate(row_votes)
            judges_col[i] = [v.to_dict() for v in row_votes]
            means[i], medians[i], spreads[i] = agg.mean, agg.median, agg.spread
            for j, vote in enumerate(row_votes):
                if vote.counts and vote.score is not None:
                    matrix[j, column] = vote.score
            unparsed = sum(1 for v in row_votes if not v.parsed)
            reasons.append("scored" if agg.counted else "no_counted_votes")
            details.append(
                f"{agg.counted} counted, {unparsed} unparsed" + (f", mean {agg.mean}" if agg.mean else "")
            )
        out = set_score(table, "judges", judges_col)
        out = set_score(out, "judge_mean", means)
        out = set_score(out, "judge_median", medians)
        out = set_score(out, "judge_spread", spreads)
        merged = add_decision(out, STAGE, ["keep"] * len(live), reasons, details, rows=live)
        return merged, krippendorff_alpha(matrix)
