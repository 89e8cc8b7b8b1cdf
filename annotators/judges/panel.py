"""A panel of judges (PoLL: Verga et al., 2024, "Replacing Judges with Juries"): several small,
different judges score every row; the aggregate is their (optionally reliability-weighted) mean,
median and spread, and Krippendorff's alpha says how far the panel agrees on a batch.

A judge that counts fewer than ``min_counted_share`` of the votes it tried on a batch is left out
of that batch's aggregate (its votes stay on the rows, marked by the report); a judge whose
counted scores never vary carries no information and is left out of alpha.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.judges.base import Judge, Vote
from ptfactory.annotators.judges.vote_columns import VoteColumns, gc_paused, rounded
from ptfactory.storage.schema import add_decision, dropped_mask
from ptfactory.storage.schema.trail import set_scores

__all__ = [
    "Aggregate",
    "Panel",
    "PanelReport",
    "aggregate",
    "judged_rows",
    "krippendorff_alpha",
    "means_by_drop_reason",
    "pair_candidate_rows",
    "pair_candidates",
    "score_columns",
]

STAGE = "judge"
DIFFICULTY_STAGE = "difficulty"
_AGGREGATES = ("judge_mean", "judge_median", "judge_spread", "judge_confidence")


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


def score_columns(
    votes: VoteColumns,
    by_judge: Sequence[Sequence[Vote]],
    weights: Mapping[str, float] | None,
    leave_out: frozenset[str],
) -> tuple[dict[str, pa.Array], np.ndarray[Any, Any]]:
    """``scores.judges`` and the aggregates of every row as Arrow columns (what :func:`aggregate`
    gives row by row, rounded alike), and the counted votes per row."""
    columns, counted, scalar = votes.aggregate(weights, leave_out)
    for r in scalar:  # what the arrays cannot reproduce exactly: aggregate() itself
        agg = aggregate([v[r] for v in by_judge], weights, leave_out)
        for name, value in zip(_AGGREGATES, (agg.mean, agg.median, agg.spread, agg.confidence), strict=True):
            values, present = columns[name]
            values[r], present[r] = (value, True) if value is not None else (0.0, False)
        counted[r] = agg.counted
    scores: dict[str, pa.Array] = {"judges": votes.struct()}
    for name in _AGGREGATES:
        values, present = columns[name]
        # a scalar row's value is already rounded; rounding it again changes nothing
        scores[name] = rounded(values, present)
    return scores, counted


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
    reach SFT, routing or review. A preference row is not scored on its own: a pair is judged by
    comparison (:mod:`~ptfactory.annotators.judges.pairwise`) or vouched for by the sandbox (an
    agent's solved rollout over a failed one)."""
    live = pc.and_(pc.invert(dropped_mask(table)), pc.not_equal(table.column("kind"), "preference"))
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
    n = table.num_rows
    means = pc.struct_field(table.column("scores").combine_chunks(), "judge_mean")
    scored = means.is_valid().to_numpy(zero_copy_only=False).astype(bool)
    values = means.fill_null(0.0).to_numpy(zero_copy_only=False)
    only = _dropped_only_by(table, stage).to_numpy(zero_copy_only=False)
    live = pc.invert(dropped_mask(table)).to_numpy(zero_copy_only=False)
    # each row's key: "kept", or the reason of its first drop at ``stage``
    key = np.full(n, "kept", dtype=object)
    keyed = live.copy()
    decisions = table.column("decisions").combine_chunks()
    flat = pc.list_flatten(decisions)
    if only.any() and len(flat):
        hit = pc.and_(pc.equal(flat.field("stage"), stage), pc.equal(flat.field("verdict"), "drop"))
        at = np.flatnonzero(hit.fill_null(False).to_numpy(zero_copy_only=False))
        rows = pc.list_parent_indices(decisions).to_numpy(zero_copy_only=False)[at]
        first = np.append(True, rows[1:] != rows[:-1])  # positions ascend with rows: a row's first
        reasons = flat.field("reason").take(pa.array(at[first], pa.int64())).to_pylist()
        mine = only[rows[first]]
        key[rows[first][mine]] = np.array(reasons, dtype=object)[mine]
        keyed[rows[first][mine]] = True
    if (only & ~keyed).any():
        raise ValueError(f"a row dropped by {stage!r} has no {stage!r} decision with verdict 'drop'")
    out: dict[str, tuple[int, float | None]] = {}
    for name in sorted(set(key[keyed].tolist())):
        members = keyed & (key == name)
        present = values[members & scored].tolist()
        mean = round(math.fsum(present) / len(present), 4) if present else None
        out[name] = (int(members.sum()), mean)
    return out


def pair_candidates(table: pa.Table, margin: float) -> pa.Table:
    """The rows :func:`~ptfactory.annotators.judges.pairwise.preference_candidates` needs from a
    judged batch: of each instruction's live, scored sft answers (sharing ``provenance.parent_id``),
    the best and the worst by (judge mean, sample_id), where their means differ by at least
    ``margin`` and at all. Instructions come in the order of their first such answer, so given these
    rows it makes the same pairs, in the same order, as given every live scored sft row, and a large
    batch is not turned into dicts for it."""
    mean = pc.struct_field(table.column("scores"), "judge_mean")
    parent = pc.struct_field(table.column("provenance"), "parent_id")
    use = pc.and_(
        pc.and_(pc.equal(table.column("kind"), "sft"), pc.invert(dropped_mask(table))), mean.is_valid()
    )
    use = pc.and_(use, pc.not_equal(parent, ""))  # a parent id is set, and not empty
    rows = np.flatnonzero(use.fill_null(False).to_numpy(zero_copy_only=False))
    if len(rows) < 2:
        return table.slice(0, 0)
    taken = pa.array(rows, pa.int64())
    groups = pc.dictionary_encode(parent.take(taken).combine_chunks()).indices.to_numpy(zero_copy_only=False)
    ranked = pa.table(
        {"g": groups, "m": mean.take(taken), "s": table.column("sample_id").take(taken), "i": rows}
    )
    order = pc.sort_indices(
        ranked, [("g", "ascending"), ("m", "ascending"), ("s", "ascending"), ("i", "ascending")]
    ).to_numpy(zero_copy_only=False)
    group, means = groups[order], mean.take(taken).to_numpy(zero_copy_only=False)[order]
    starts = np.flatnonzero(np.append(True, group[1:] != group[:-1]))
    ends = np.append(starts[1:], len(order)) - 1
    gap = means[ends] - means[starts]  # best (last: highest mean, then sample_id) minus worst (first)
    chosen = (ends > starts) & (gap > 0) & (gap >= margin)
    first = np.minimum.reduceat(rows[order], starts)  # each instruction's first answer
    picked = np.stack([rows[order][starts], rows[order][ends]], axis=1)[chosen]
    keys = np.repeat(first[chosen], 2)
    flat = picked.ravel()
    return table.take(pa.array(flat[np.lexsort((flat, keys))], pa.int64()))


def pair_candidate_rows(table: pa.Table, margin: float) -> list[dict[str, object]]:
    """:func:`pair_candidates` as the dicts ``preference_candidates`` takes, made cheaply: a
    candidate's ``scores`` keep only ``judge_mean`` and its ``decisions`` are left empty, as a
    preference row is built from its chosen row's other columns but gets scores (the comparisons)
    and a decision of its own (tested: the same preference rows as from the full rows)."""
    rows = pair_candidates(table, margin)
    means = pc.struct_field(rows.column("scores"), "judge_mean")
    only_mean = pa.StructArray.from_arrays(
        [means.combine_chunks() if isinstance(means, pa.ChunkedArray) else means], names=["judge_mean"]
    )
    rows = rows.set_column(rows.schema.get_field_index("scores"), "scores", only_mean)
    rows = rows.set_column(
        rows.schema.get_field_index("decisions"),
        "decisions",
        pa.nulls(rows.num_rows, rows.schema.field("decisions").type),
    )
    with gc_paused():
        picked: list[dict[str, object]] = rows.to_pylist()
    return picked


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
        by_judge = [[row[j] for row in votes] for j in range(len(self.judges))]
        return self._assess(VoteColumns.of(by_judge))

    def _assess(self, votes: VoteColumns) -> PanelReport:
        report = PanelReport()
        counts = votes.counts
        matrix = np.where(counts, votes.score, np.nan)
        tried = ~(votes.parsed & ~votes.has_score)  # abstentions are not losses
        informative = []
        for j, judge in enumerate(self.judges):
            n_tried = int(tried[j].sum())
            share = int(counts[j].sum()) / n_tried if n_tried else None
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

    def _rows(self, table: pa.Table, judged: list[int]) -> list[dict[str, object]]:
        """The judged rows as the judges' dicts: only the columns every judge says it ``reads``
        (all of them where a judge does not say), with the garbage collector paused, since a
        hundred thousand fresh dicts make no cycles but would trigger rescans of every live object."""
        reads: set[str] = set()
        for judge in self.judges:
            columns = getattr(judge, "reads", None)
            if columns is None:
                reads = set(table.column_names)
                break
            reads.update(columns)
        if not judged:
            return []
        picked = table.select([c for c in table.column_names if c in reads])
        with gc_paused():
            rows: list[dict[str, object]] = picked.take(pa.array(judged, pa.int64())).to_pylist()
        return rows

    def judge_table(self, table: pa.Table) -> tuple[pa.Table, PanelReport]:
        """Every row back; judged rows get ``scores.judges`` and the aggregates; live rows get a
        ``judge`` decision (``keep``: the routing stage decides)."""
        judged = judged_rows(table)
        live = pc.invert(dropped_mask(table)).to_numpy(zero_copy_only=False)
        rows = self._rows(table, judged)
        by_judge = [judge.judge(rows) for judge in self.judges]
        if not rows:
            return self._nothing_judged(table, by_judge)
        if not self.judges or any(len(votes) != len(rows) for votes in by_judge):
            raise ValueError(
                f"every judge gives one vote per row: {len(rows)} rows, "
                + ", ".join(f"{j.name} {len(v)}" for j, v in zip(self.judges, by_judge, strict=True))
            )
        with gc_paused():
            votes = VoteColumns.of(by_judge)
            report = self._assess(votes)
            leave_out = frozenset(report.left_out)
            scores, counted = score_columns(votes, by_judge, self.weights, leave_out)
            live_judged = np.flatnonzero(live[np.asarray(judged, dtype=np.int64)])
            decided = [judged[k] for k in live_judged.tolist()]
            counts = counted[live_judged].tolist()
            unparsed = (~votes.parsed).sum(axis=0)[live_judged].tolist()
            means = scores["judge_mean"].take(pa.array(live_judged, pa.int64())).to_pylist()
            left = f"; left out: {', '.join(sorted(leave_out))}" if leave_out else ""
            reasons = ["scored" if c else "no_counted_votes" for c in counts]
            details = [
                f"{c} counted, {u} unparsed" + (f", mean {m}" if m is not None else "") + left
                for c, u, m in zip(counts, unparsed, means, strict=True)
            ]
        out = set_scores(table, scores, rows=judged)
        merged = add_decision(out, STAGE, ["keep"] * len(decided), reasons, details, rows=decided)
        return merged, report

    def _nothing_judged(self, table: pa.Table, by_judge: list[list[Vote]]) -> tuple[pa.Table, PanelReport]:
        report = self._assess(VoteColumns.of(by_judge))
        out = set_scores(table, {name: [] for name in ("judges", *_AGGREGATES)}, rows=[])
        return add_decision(out, STAGE, [], [], [], rows=[]), report
