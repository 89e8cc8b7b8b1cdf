"""A panel of judges (PoLL: Verga et al., 2024, "Replacing Judges with Juries"), with the verifiers
first: where a check exists it decides, and the judges earn their weight on the batch.

:meth:`Panel.judge_table` on a batch, in order:

1. **Verifiers** (:class:`~ptfactory.annotators.judges.verifiers.VerifierSet`) check every judged
   row they apply to; their verdicts go to ``scores.verifiers`` with the evidence, and each becomes a
   vote (pass 10, fail 1; partial, no_answer and abstain no score) of weight 1.
2. **Judges** (LLM, embedding) vote on every unverified row and on a bounded sample of the verified
   ones (``verified_sample``, generator-produced rows first), so they can be measured; a judge
   abstains (``self``) on rows its own family wrote (annotators/judges/base.py). Each judge scores
   the labelled generator-produced rows first: one whose AUC there is already under 0.55 has weight
   0 on the batch whatever it says elsewhere, so it is not asked about the other rows (an
   abstention, ``flagged_out``): no compute spent on votes that cannot count.
3. **Weights** (annotators/judges/weights.py): each judge's AUC against the verifiers on the
   batch's labelled generator-produced rows, with its interval, gives its weight; too few labels:
   its persisted weight from the calibration store, or 0; AUC under 0.55: 0 and flagged. A judge
   counting fewer than ``min_counted_share`` of its votes is left out; a near-constant one leaves
   the mean. Stored cuts move each judge's scores onto the common accept line, stored centres move
   likelihood judges' score mapping (annotators/judges/calibration_fit.py).
4. **Aggregate** (:func:`~ptfactory.annotators.judges.vote_columns.aggregate`, the only one):
   ``judge_mean``, ``judge_median``, ``judge_spread``, ``judge_confidence`` and ``judge_votes``
   (independent weighted votes: routing's two-vote rule).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.judges.base import SELF, Judge, Vote
from ptfactory.annotators.judges.batch import (
    DIFFICULTY_STAGE,
    judged_rows,
    means_by_drop_reason,
    pair_candidate_indices,
    pair_candidate_rows,
    pair_candidates,
)
from ptfactory.annotators.judges.calibration_fit import recentre
from ptfactory.annotators.judges.calibration_store import CalibrationStore
from ptfactory.annotators.judges.identity import generator_family, independence_key
from ptfactory.annotators.judges.likelihood import LIKELIHOOD_METHODS
from ptfactory.annotators.judges.report import PanelReport, krippendorff_alpha, self_preference_warning
from ptfactory.annotators.judges.verifiers import VerifierSet, labels_of
from ptfactory.annotators.judges.vote_columns import Aggregate, VoteColumns, aggregate, gc_paused
from ptfactory.annotators.judges.weights import MIN_AUC, JudgeWeight, judge_weight, near_constant
from ptfactory.filters.verify import record_verdicts
from ptfactory.storage.schema import add_decision, dropped_mask
from ptfactory.storage.schema.trail import set_scores

__all__ = [
    "DIFFICULTY_STAGE",
    "STAGE",
    "Aggregate",
    "Panel",
    "PanelReport",
    "judged_rows",
    "krippendorff_alpha",
    "means_by_drop_reason",
    "pair_candidate_indices",
    "pair_candidate_rows",
    "pair_candidates",
]

STAGE = "judge"
SAMPLED_OUT = "sampled_out"  # the method of a judge's abstention on a verified row beyond the sample
FLAGGED_OUT = "flagged_out"  # ... on a row after the batch's labelled rows flagged the judge
Progress = Callable[[int, int], None]


def _sample_draw(sample_id: str) -> float:
    digest = hashlib.blake2b(f"judge-sample:{sample_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass
class Panel:
    judges: list[Judge]
    verifiers: VerifierSet | None = None
    min_counted_share: float = 0.95
    store: CalibrationStore | None = None  # persisted weights, cuts and centres per judge identity
    verified_sample: int = 1000  # verifier-decided rows a batch's judges score (at least this many)
    # the last batch's weights of the judges something measured (an unmeasured judge is absent):
    # what preference candidates weigh the same judges' comparisons by
    weights: dict[str, float] | None = None
    _centred: bool = field(default=False, init=False, repr=False)

    # -- who the judges are ------------------------------------------------------------------

    def identities(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """name -> (identity key, identity) of every judge (what the calibration store keys on)."""
        return {j.name: (j.identity_key, j.identity()) for j in self.judges}

    def _centre(self) -> None:
        """Likelihood judges take the centre their calibration fitted (once, before they vote)."""
        if self._centred or self.store is None:
            return
        for judge in self.judges:
            if getattr(judge, "method", "") in LIKELIHOOD_METHODS:
                centre = self.store.centre(judge.identity_key)
                if centre is not None:
                    judge.likelihood_center = centre  # type: ignore[attr-defined]
        self._centred = True

    def vote(self, rows: list[dict[str, Any]]) -> list[list[Vote]]:
        """votes[row][judge] of the judges alone (no verifier, no weights): a warm-up, a probe."""
        by_judge = [judge.judge(rows) for judge in self.judges]
        return [list(row_votes) for row_votes in zip(*by_judge, strict=True)] if rows else []

    # -- a batch -----------------------------------------------------------------------------

    def _rows(self, table: pa.Table, rows: list[int]) -> list[dict[str, Any]]:
        """The rows as the judges' dicts: only the columns the judges read (all where one does not say)."""
        reads: set[str] = set()
        for judge in self.judges:
            if judge.reads is None:
                reads = set(table.column_names)
                break
            reads.update(judge.reads)
        if not rows:
            return []
        picked = table.select([c for c in table.column_names if c in reads])
        with gc_paused():
            out: list[dict[str, Any]] = picked.take(pa.array(rows, pa.int64())).to_pylist()
        return out

    def _shown(
        self, ids: list[str], labels: np.ndarray[Any, Any], generated: np.ndarray[Any, Any]
    ) -> list[int]:
        """Positions the judges score: every unverified row, and of the verified ones the
        generator-produced first, then by a hash of the sample_id, up to ``verified_sample``."""
        verified = np.flatnonzero(labels >= 0)
        if len(verified) <= self.verified_sample:
            return list(range(len(ids)))
        ranked = sorted(verified.tolist(), key=lambda k: (not generated[k], _sample_draw(ids[k])))
        keep = set(ranked[: self.verified_sample]) | set(np.flatnonzero(labels < 0).tolist())
        return sorted(keep)

    def _judge_votes(
        self,
        rows: list[dict[str, Any]],
        progress: Progress | None,
        judges: list[Judge] | None = None,
        done: int = 0,
        total: int | None = None,
    ) -> list[list[Vote]]:
        """votes[judge][row] of ``judges`` (default all), asked in chunks when ``progress`` is given
        (``done`` + rows done after each, of ``total``)."""
        judges = self.judges if judges is None else judges
        total = len(rows) if total is None else total
        step = 64 if progress is not None else max(1, len(rows))
        by_judge: list[list[Vote]] = [[] for _ in judges]
        for start in range(0, len(rows), step):
            chunk = rows[start : start + step]
            for j, judge in enumerate(judges):
                by_judge[j].extend(judge.judge(chunk))
            if progress is not None:
                progress(done + min(start + step, len(rows)), total)
        for judge, votes in zip(judges, by_judge, strict=True):
            if len(votes) != len(rows):
                raise ValueError(
                    f"every judge gives one vote per row: {len(rows)} rows, {judge.name} {len(votes)}"
                )
        return by_judge

    def _audited_votes(
        self, rows: list[dict[str, Any]], truth: dict[int, bool], progress: Progress | None
    ) -> list[list[Vote]]:
        """votes[judge][row]: the labelled generator-produced rows first (``truth``: position in
        ``rows`` -> the verifier passed it); a judge those rows flag (AUC under MIN_AUC on at least
        MIN_PER_CLASS of each class: weight 0 on the batch, :func:`judge_weight`) abstains on the
        others unasked (FLAGGED_OUT). The weight computed later from every vote is the same: the
        labelled rows are all here."""
        if not self.judges:  # verifiers alone: nothing to ask (and ``rows`` holds no columns)
            return []
        first = sorted(truth)
        rest = [k for k in range(len(rows)) if k not in truth]
        audit = self._judge_votes([rows[k] for k in first], progress, total=len(rows))
        labels = np.array([truth[k] for k in first], bool)
        asked: list[int] = []
        out: list[list[Vote | None]] = []
        for judge, votes in zip(self.judges, audit, strict=True):
            scores = np.array([v.score if v.counts else np.nan for v in votes], np.float64)
            persisted = self.store.persisted(judge.identity_key) if self.store is not None else None
            measured = judge_weight(judge.name, scores, labels, persisted)
            full: list[Vote | None] = [None] * len(rows)
            for k, vote in zip(first, votes, strict=True):
                full[k] = vote
            if measured.flagged:
                note = f"not asked: AUC {measured.auc:.2f} under {MIN_AUC} on this batch's verified rows"
                for k in rest:
                    full[k] = Vote(judge.name, judge.model, None, "abstain", note, method=FLAGGED_OUT)
            else:
                asked.append(len(out))
            out.append(full)
        later = self._judge_votes(
            [rows[k] for k in rest], progress, [self.judges[j] for j in asked], len(first), len(rows)
        )
        for j, votes in zip(asked, later, strict=True):
            for k, vote in zip(rest, votes, strict=True):
                out[j][k] = vote
        return [[vote for vote in full if vote is not None] for full in out]

    def judge_table(
        self,
        table: pa.Table,
        *,
        extra: Sequence[dict[str, Any]] | None = None,
        generated: np.ndarray[Any, Any] | None = None,
        progress: Progress | None = None,
    ) -> tuple[pa.Table, PanelReport]:
        """Every row back; judged rows get ``scores.verifiers``, ``scores.judges`` (verifiers
        first) and the aggregates; live judged rows get a ``judge`` decision (``keep``: routing
        decides). ``extra``: per table row, fields the verifiers read besides the row's (``ptf
        judge``'s columns); ``generated``: per table row, produced by a generator (default:
        ``provenance.model`` is set)."""
        self._centre()
        judged = judged_rows(table)
        verifiers = self.verifiers or VerifierSet(members=[])
        verdicts = verifiers.verify(table, judged, extra)
        if verifiers.members:
            table = record_verdicts(table, verdicts, rows=judged)
        labels = labels_of(verdicts)
        made = (
            self._generated(table, generated)[np.asarray(judged, np.int64)] if judged else np.zeros(0, bool)
        )
        ids = table.column("sample_id").to_pylist()
        shown = self._shown([ids[i] for i in judged], labels, made)
        rows = self._rows(table, [judged[k] for k in shown])
        truth = {p: bool(labels[k] == 1) for p, k in enumerate(shown) if labels[k] >= 0 and made[k]}
        by_judge = self._expand(self._audited_votes(rows, truth, progress), shown, len(judged))
        members = verifiers.votes(verdicts) + by_judge
        report = PanelReport(sampled_out=len(judged) - len(shown))
        if not judged:
            return self._nothing_judged(table, report)
        with gc_paused():
            votes = VoteColumns.of(members)
            v = len(verifiers.members)
            self._assess(votes, v, report)
            report.weights = self._weights(votes, v, labels, made, report)
            agg = self._aggregate(votes, verifiers, report)
            applied = np.ones(votes.score.shape, bool)
            for k, name in enumerate(verifiers.names):  # a verifier leaves a vote where it applied
                applied[k] = [any(d.verifier == name for d in row) for row in verdicts]
            scores: dict[str, pa.Array] = {"judges": votes.struct(applied), **agg.columns()}
            self._account(report, verifiers=verifiers, verdicts=verdicts, by_judge=by_judge, rows=rows)
        out = set_scores(table, scores, rows=judged)
        return self._decide(out, judged, votes, agg, report), report

    @staticmethod
    def _generated(table: pa.Table, given: np.ndarray[Any, Any] | None) -> np.ndarray[Any, Any]:
        if given is not None:
            return np.asarray(given, bool)
        model = pc.struct_field(table.column("provenance"), "model")
        flags: np.ndarray[Any, Any] = np.asarray(
            pc.and_(model.is_valid(), pc.not_equal(model, ""))
            .fill_null(False)
            .to_numpy(zero_copy_only=False),
            bool,
        )
        return flags

    def _expand(self, by_judge: list[list[Vote]], shown: list[int], total: int) -> list[list[Vote]]:
        """Each judge's votes over every judged row: an abstention on verified rows it was not shown."""
        if len(shown) == total:
            return by_judge
        out = []
        for judge, votes in zip(self.judges, by_judge, strict=True):
            full = [
                Vote(
                    judge.name,
                    judge.model,
                    None,
                    "abstain",
                    "verified: beyond the judges' sample",
                    method=SAMPLED_OUT,
                )
                for _ in range(total)
            ]
            for k, vote in zip(shown, votes, strict=True):
                full[k] = vote
            out.append(full)
        return out

    def _assess(self, votes: VoteColumns, v: int, report: PanelReport) -> None:
        """Counted share, left out, constant, alpha (over the judges: verifiers are not assessed)."""
        counts = votes.counts
        matrix = np.where(counts, votes.score, np.nan)
        tried = ~(votes.parsed & ~votes.has_score)  # abstentions are not losses
        informative = []
        for j, judge in enumerate(self.judges, start=v):
            n_tried = int(tried[j].sum())
            share = int(counts[j].sum()) / n_tried if n_tried else None
            report.counted_share[judge.name] = round(share, 4) if share is not None else None
            if share is not None and share < self.min_counted_share:
                report.left_out.append(judge.name)
            if near_constant(matrix[j]):
                report.constant.append(judge.name)
            elif judge.name not in report.left_out:
                informative.append(j)
        report.alpha = krippendorff_alpha(matrix[informative]) if informative else None

    def _weights(
        self,
        votes: VoteColumns,
        v: int,
        labels: np.ndarray[Any, Any],
        made: np.ndarray[Any, Any],
        report: PanelReport,
    ) -> dict[str, JudgeWeight]:
        labelled = (labels >= 0) & made
        truth = labels[labelled] == 1
        report.labelled = (int(truth.sum()), int((~truth).sum()))
        out = {}
        for j, judge in enumerate(self.judges, start=v):
            scores = np.where(votes.counts[j], votes.score[j], np.nan)[labelled]
            persisted = self.store.persisted(judge.identity_key) if self.store is not None else None
            out[judge.name] = judge_weight(
                judge.name,
                scores,
                truth,
                persisted,
                constant=judge.name in report.constant,
                left_out=judge.name in report.left_out,
            )
        self.weights = {n: w.weight for n, w in out.items() if not w.unmeasured}
        return out

    def _aggregate(self, votes: VoteColumns, verifiers: VerifierSet, report: PanelReport) -> Aggregate:
        scores = votes.score.copy()
        v = len(verifiers.members)
        for j, judge in enumerate(self.judges, start=v):
            cut = self.store.cut(judge.identity_key) if self.store is not None else None
            if cut is not None:  # the judge's own accept point onto the common line
                scores[j] = np.where(votes.has_score[j], recentre(np.nan_to_num(scores[j]), cut), np.nan)
        weights = [report.weights[j.name] for j in self.judges]
        return aggregate(
            votes,
            [1.0] * v + [w.weight for w in weights],
            in_batch=[True] * v + [not (w.constant or w.left_out) for w in weights],
            unmeasured=[False] * v + [w.unmeasured for w in weights],
            keys=verifiers.keys() + [independence_key(j.family, j.method) for j in self.judges],
            scores=scores,
        )

    def _account(
        self,
        report: PanelReport,
        *,
        verifiers: VerifierSet,
        verdicts: list[list[Any]],
        by_judge: list[list[Vote]],
        rows: list[dict[str, Any]],
    ) -> None:
        for name in verifiers.names:
            report.verdicts[name] = Counter(d.verdict for row in verdicts for d in row if d.verifier == name)
        for judge, votes in zip(self.judges, by_judge, strict=True):
            report.self_abstained[judge.name] = sum(1 for vote in votes if vote.method == SELF)
            report.flagged_out[judge.name] = sum(1 for vote in votes if vote.method == FLAGGED_OUT)
        generators = {f for row in rows if (f := generator_family(row)) is not None}
        report.self_preference = self_preference_warning({j.name: j.family for j in self.judges}, generators)
        if self.store is not None:
            report.resets = self.store.resets({j.name: j.identity_key for j in self.judges})

    def _decide(
        self, table: pa.Table, judged: list[int], votes: VoteColumns, agg: Aggregate, report: PanelReport
    ) -> pa.Table:
        live = pc.invert(dropped_mask(table)).to_numpy(zero_copy_only=False)
        at = np.flatnonzero(live[np.asarray(judged, dtype=np.int64)])
        decided = [judged[k] for k in at.tolist()]
        counted, independent = agg.counted[at].tolist(), agg.votes[at].tolist()
        unparsed = (~votes.parsed).sum(axis=0)[at].tolist()
        means = agg.columns()["judge_mean"].take(pa.array(at, pa.int64())).to_pylist()
        out = sorted(set(report.left_out) | set(report.constant))
        left = f"; out of the mean: {', '.join(out)}" if out else ""
        reasons = ["scored" if c else "no_counted_votes" for c in counted]
        details = [
            f"{c} counted ({i} independent), {u} unparsed" + (f", mean {m}" if m is not None else "") + left
            for c, i, u, m in zip(counted, independent, unparsed, means, strict=True)
        ]
        return add_decision(table, STAGE, ["keep"] * len(decided), reasons, details, rows=decided)

    def _nothing_judged(self, table: pa.Table, report: PanelReport) -> tuple[pa.Table, PanelReport]:
        out = set_scores(table, {"judges": []}, rows=[])
        return add_decision(out, STAGE, [], [], [], rows=[]), report
