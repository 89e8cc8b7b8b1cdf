"""A batch's votes as columns: every row's aggregate at once, and ``scores.judges`` built in Arrow.

The panel's judges hand back one :class:`~ptfactory.annotators.judges.base.Vote` per row each.
Aggregating them row by row (a list of votes, a dict per vote) was most of the panel's own time on
a large batch; here each judge's votes become arrays once (judges × rows) and the mean, median,
spread and confidence of :func:`~ptfactory.annotators.judges.panel.aggregate` are computed on
them, with the same floating-point operations in the same order, so the numbers are identical
(tested against ``aggregate`` on random votes). Rows the arrays cannot reproduce exactly (every
counted weight zero, a NaN score) are handed to ``aggregate`` itself.
"""

from __future__ import annotations

import gc
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.judges.base import Vote
from ptfactory.storage.schema import JUDGE_VOTE
from ptfactory.storage.schema.trail import rounded

__all__ = ["VoteColumns", "gc_paused", "rounded"]

_VOTES = pa.list_(JUDGE_VOTE)

Array = np.ndarray[Any, Any]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a batch's worth of plain containers (row dicts,
    vote tuples) is made: they form no cycles, but each allocation threshold they cross would
    rescan every live object, which on a large batch took longer than the work itself."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _builtin_sum(terms: Sequence[Array], take: Sequence[Array]) -> Array:
    """Per row, what ``sum()`` over the terms where ``take`` is true gives on this Python: a plain
    left-to-right sum before 3.12, Neumaier's compensated sum from 3.12 on (what ``sum`` does with
    floats there). Starting from the int 0 as ``sum`` does: 0 + x is x, except -0.0 gives 0.0."""
    rows = len(terms[0]) if terms else 0
    total, fix, started = np.zeros(rows), np.zeros(rows), np.zeros(rows, dtype=bool)
    compensated = sys.version_info >= (3, 12)
    for term, use in zip(terms, take, strict=True):
        later = use & started
        if compensated:
            t = total + term
            big = np.abs(total) >= np.abs(term)
            with np.errstate(invalid="ignore"):
                step = np.where(big, (total - t) + term, (term - t) + total)
            fix = np.where(later, fix + step, fix)
            total = np.where(later, t, total)
        else:
            total = np.where(later, total + term, total)
        total = np.where(use & ~started, 0.0 + term, total)
        started |= use
    if compensated:
        add = (fix != 0) & np.isfinite(fix)
        total = np.where(add, total + fix, total)
    return total


@dataclass
class VoteColumns:
    """Each judge's votes over the same rows, as arrays indexed [judge, row]."""

    fields: list[list[pa.Array]]  # [judge]: one array per JUDGE_VOTE field
    score: Array  # float, NaN where there is no score
    has_score: Array
    parsed: Array
    confidence: Array
    has_confidence: Array

    @classmethod
    def of(cls, by_judge: list[list[Vote]]) -> VoteColumns:
        rows = len(by_judge[0]) if by_judge else 0
        # Arrow reads each vote's fields (what Vote.to_dict copies) in one pass, as the row-by-row
        # code's pa.array over to_dict() did: the same conversions, without a copy a vote
        structs = [pa.array([vars(v) for v in votes], JUDGE_VOTE) for votes in by_judge]
        fields = [[s.field(i) for i in range(len(JUDGE_VOTE))] for s in structs]
        at = {f.name: i for i, f in enumerate(JUDGE_VOTE)}

        def stack(name: str, part: Callable[[pa.Array], Array], dtype: Any) -> Array:
            arrays = [part(columns[at[name]]) for columns in fields]
            return np.array(arrays, dtype=dtype).reshape(len(by_judge), rows)

        def values(a: pa.Array) -> Array:
            return np.asarray(a.to_numpy(zero_copy_only=False), np.float64)

        def valid(a: pa.Array) -> Array:
            return np.asarray(a.is_valid().to_numpy(zero_copy_only=False), bool)

        def truthy(a: pa.Array) -> Array:
            return np.asarray(a.fill_null(False).to_numpy(zero_copy_only=False), bool)

        return cls(
            fields,
            stack("score", values, np.float64),
            stack("score", valid, bool),
            stack("parsed", truthy, bool),
            stack("confidence", values, np.float64),
            stack("confidence", valid, bool),
        )

    @property
    def rows(self) -> int:
        return int(self.score.shape[1])

    @property
    def counts(self) -> Array:
        """``Vote.counts``: parsed, with a score."""
        counts: Array = self.parsed & self.has_score
        return counts

    def per_vote(self, of_name: Callable[[str], Any], dtype: Any) -> Array:
        """``of_name(vote.judge)`` for every vote (the name a vote carries, as ``aggregate`` reads it)."""
        out = np.empty(self.score.shape, dtype=dtype)
        for j, columns in enumerate(self.fields):
            names = pc.dictionary_encode(columns[0])  # a judge's votes mostly carry one name
            each = [of_name(name) for name in names.dictionary.to_pylist()]
            if len(each) == 1 and names.null_count == 0:
                out[j] = each[0]
            elif len(names):
                codes = names.indices.fill_null(-1).to_numpy(zero_copy_only=False)
                out[j] = np.array([*each, of_name(None)], dtype=dtype)[codes]  # -1: no name
        return out

    def aggregate(
        self, weights: Mapping[str, float] | None, leave_out: frozenset[str]
    ) -> tuple[dict[str, tuple[Array, Array]], Array, list[int]]:
        """The columns ``judge_mean``, ``judge_median``, ``judge_spread``, ``judge_confidence`` (as
        :func:`~ptfactory.annotators.judges.panel.aggregate` gives them per row, before rounding:
        values and where each is set), the counted votes per row, and the rows ``aggregate`` must
        compute itself."""
        counted = self.counts & ~self.per_vote(lambda name: name in leave_out, bool)
        k = counted.sum(axis=0)
        w = self.per_vote(lambda name: max(float((weights or {}).get(name, 1.0)), 0.0), np.float64)
        values = np.where(counted, self.score, np.nan)
        with np.errstate(invalid="ignore"):
            products = [values[j] * w[j] for j in range(len(values))]
        weight_sum = _builtin_sum(list(w), list(counted))
        exact = (k == 0) | ((weight_sum > 0) & ~np.isnan(values).any(axis=0, where=counted))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = _builtin_sum(products, list(counted)) / np.where(weight_sum > 0, weight_sum, 1.0)
        ordered = np.sort(values, axis=0)  # NaN (not counted) last
        cols = np.arange(self.rows)
        low, high = ordered[0], ordered[np.maximum(k - 1, 0), cols]
        mid, below = ordered[k // 2, cols], ordered[np.maximum(k // 2 - 1, 0), cols]
        median = np.where(k % 2 == 1, mid, (below + mid) / 2)
        scored = k > 0
        out = {
            "judge_mean": (mean, scored),
            "judge_median": (median, scored),
            "judge_spread": (high - low, scored),
            "judge_confidence": self._confidence(counted),
        }
        return out, k, np.flatnonzero(~exact).tolist()

    def _confidence(self, counted: Array) -> tuple[Array, Array]:
        """``fmean`` (``fsum / n``) of the counted votes' confidences: one or two values sum exactly
        in floating point; three or more go through ``math.fsum``."""
        stated = counted & self.has_confidence
        m = stated.sum(axis=0)
        conf = np.where(stated, self.confidence, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = _builtin_sum(list(conf), list(stated)) / np.maximum(m, 1)
        many = np.flatnonzero(m >= 3).tolist()
        if many:
            values, use = self.confidence.tolist(), stated.tolist()
            judges = range(len(values))
            for r in many:
                mean[r] = math.fsum([values[j][r] for j in judges if use[j][r]]) / int(m[r])
        return mean, m > 0

    def struct(self) -> pa.ListArray:
        """``scores.judges`` of every row: its votes in judge order (``Vote.to_dict``, in Arrow)."""
        judges, rows = len(self.fields), self.rows
        parts = [pa.StructArray.from_arrays(columns, fields=list(JUDGE_VOTE)) for columns in self.fields]
        flat = pa.concat_arrays(parts) if parts else pa.array([], JUDGE_VOTE)
        # judge-major (all of judge 0's votes, then judge 1's) to row-major
        interleave = np.arange(judges * rows, dtype=np.int64).reshape(judges, rows).T.ravel()
        offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * judges)
        return pa.ListArray.from_arrays(offsets, flat.take(pa.array(interleave)), type=_VOTES)
