"""A batch's votes as columns, and the panel's one aggregate over them.

The panel's members (verifiers first, then the judges) hand back one
:class:`~ptfactory.annotators.judges.base.Vote` per row each; here they become arrays indexed
[member, row] once, ``scores.judges`` is built from them in Arrow, and :func:`aggregate` computes
every row's mean, median, spread, confidence and independent-vote count at once. It is the only
implementation of the panel's rules (the asset, ``ptf judge`` and preference candidates all call
it; tests/annotators/rowwise holds a short reference of the rules, written from the issue):

- A vote **counts** when it parsed and has a score; a member's votes count on a batch unless the
  member is left out (too few counted votes) or constant (no information: it leaves the mean, not
  only alpha). Verifiers are never constant-tested: a batch that passes everything is information.
- A counted vote is **weighted** when its member's weight on the batch is > 0 (verifiers weigh 1;
  judges earn their weight, :mod:`~ptfactory.annotators.judges.weights`). Where a row has weighted
  votes its mean is their weighted mean, and the median, spread and confidence are over them.
- A row with no weighted vote falls back to the equal mean of the counted votes of *unmeasured*
  judges (nothing measured them yet: a fresh panel, ``ptf judge`` on unlabelled rows), so scores
  still rank rows; such a row has 0 independent votes, and routing decides nothing on it alone.
  Judges measured and found wanting (below the AUC floor) never enter.
- ``votes``: the number of distinct independence keys among a row's weighted votes (family and
  method for judges, the evidence read for verifiers): the two-vote rule counts these.
- ``confidence``: the mean of the confidences the weighted votes state (probability and pairwise
  votes do); null where none states one, so routing's uncertainty never invents one.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ptfactory.annotators.judges.base import Vote
from ptfactory.storage.schema import JUDGE_VOTE
from ptfactory.storage.schema.trail import rounded

__all__ = ["Aggregate", "VoteColumns", "aggregate", "gc_paused", "rounded"]

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


@dataclass
class VoteColumns:
    """Each member's votes over the same rows, as arrays indexed [member, row]."""

    fields: list[list[pa.Array]]  # [member]: one array per JUDGE_VOTE field
    score: Array  # float, NaN where there is no score
    has_score: Array
    parsed: Array
    confidence: Array
    has_confidence: Array

    @classmethod
    def of(cls, by_member: Sequence[Sequence[Vote]]) -> VoteColumns:
        rows = len(by_member[0]) if by_member else 0
        structs = [pa.array([vars(v) for v in votes], JUDGE_VOTE) for votes in by_member]
        fields = [[s.field(i) for i in range(len(JUDGE_VOTE))] for s in structs]
        at = {f.name: i for i, f in enumerate(JUDGE_VOTE)}

        def stack(name: str, part: Callable[[pa.Array], Array], dtype: Any) -> Array:
            arrays = [part(columns[at[name]]) for columns in fields]
            return np.array(arrays, dtype=dtype).reshape(len(by_member), rows)

        def values(a: pa.Array) -> Array:
            return np.asarray(a.to_numpy(zero_copy_only=False), np.float64)

        def valid(a: pa.Array) -> Array:
            return np.asarray(a.is_valid().to_numpy(zero_copy_only=False), bool)

        def truthy(a: pa.Array) -> Array:
            return np.asarray(a.fill_null(False).to_numpy(zero_copy_only=False), bool)

        return cls(
            fields,
            stack("score", values, np.float64),
            stack("score", valid, bool) & ~np.isnan(stack("score", values, np.float64)),
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

    def struct(self, keep: Array | None = None) -> pa.ListArray:
        """``scores.judges`` of every row: its votes in member order (``Vote.to_dict``, in Arrow);
        ``keep`` [member, row]: the votes to store (default all: a verifier that did not apply to a
        row leaves no vote there)."""
        members, rows = len(self.fields), self.rows
        parts = [pa.StructArray.from_arrays(columns, fields=list(JUDGE_VOTE)) for columns in self.fields]
        flat = pa.concat_arrays(parts) if parts else pa.array([], JUDGE_VOTE)
        # member-major (all of member 0's votes, then member 1's) to row-major
        order = np.arange(members * rows, dtype=np.int64).reshape(members, rows)
        kept = np.ones((members, rows), bool) if keep is None else np.asarray(keep, bool)
        interleave = order.T[kept.T]
        offsets = pa.array(np.concatenate([[0], np.cumsum(kept.sum(axis=0))]).astype(np.int32))
        return pa.ListArray.from_arrays(offsets, flat.take(pa.array(interleave)), type=_VOTES)


@dataclass(frozen=True)
class Aggregate:
    """Every row's aggregate (arrays over rows; ``present``: where mean/median/spread are set)."""

    mean: Array
    median: Array
    spread: Array
    present: Array
    confidence: Array
    has_confidence: Array
    counted: Array  # votes that entered the row's mean
    votes: Array  # independent weighted votes (the two-vote rule)

    def columns(self) -> dict[str, pa.Array]:
        """The ``scores`` fields, rounded as stored."""
        return {
            "judge_mean": rounded(self.mean, self.present),
            "judge_median": rounded(self.median, self.present),
            "judge_spread": rounded(self.spread, self.present),
            "judge_confidence": rounded(self.confidence, self.has_confidence),
            "judge_votes": pa.array(self.votes.astype(np.int32), pa.int32()),
        }


def aggregate(
    votes: VoteColumns,
    weights: Sequence[float],
    *,
    in_batch: Sequence[bool] | None = None,
    unmeasured: Sequence[bool] | None = None,
    keys: Sequence[str] | None = None,
    scores: Array | None = None,
) -> Aggregate:
    """The panel's aggregate of every row (see the module docstring for the rules).

    Per member: ``weights`` (>= 0), ``in_batch`` (False: left out or constant on the batch; default
    all True), ``unmeasured`` (a 0 weight that only means nothing measured the member; default all
    False), ``keys`` (independence keys; default one per member). ``scores``: the values to
    average where they differ from the recorded votes' (a judge's calibrated cut moved onto the
    common accept line); default the votes' own scores.
    """
    members, rows = votes.score.shape
    w = np.asarray(weights, np.float64).reshape(members, 1).clip(min=0.0)
    inside = np.ones(members, bool) if in_batch is None else np.asarray(in_batch, bool)
    fresh = np.zeros(members, bool) if unmeasured is None else np.asarray(unmeasured, bool)
    names = [str(m) for m in range(members)] if keys is None else list(keys)
    values = votes.score if scores is None else scores
    counted = votes.counts & inside[:, None]
    weighted: Array = counted & (w > 0)
    unweighted: Array = ~np.any(weighted, axis=0)
    fallback: Array = counted & fresh[:, None] & unweighted[None, :]
    use = weighted | fallback
    share = np.where(weighted, w, 0.0) + np.where(fallback, 1.0, 0.0)
    present = use.any(axis=0)
    picked = np.where(use, values, np.nan)
    total = share.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: rows nothing scored
        mean = np.where(present, np.nansum(np.where(use, values, 0.0) * share, axis=0) / total, np.nan)
        median = np.nanmedian(picked, axis=0) if members else np.full(rows, np.nan)
        spread = np.nanmax(picked, axis=0) - np.nanmin(picked, axis=0) if members else np.full(rows, np.nan)
        stated = use & votes.has_confidence
        confidence = np.where(stated, votes.confidence, 0.0).sum(axis=0) / np.maximum(stated.sum(axis=0), 1)
    codes = {key: k for k, key in enumerate(dict.fromkeys(names))}
    independent = np.zeros((len(codes), rows), bool)
    for member, key in enumerate(names):
        independent[codes[key]] |= weighted[member]
    return Aggregate(
        mean=np.where(present, mean, 0.0),
        median=np.where(present, median, 0.0),
        spread=np.where(present, spread, 0.0),
        present=present,
        confidence=confidence,
        has_confidence=stated.any(axis=0),
        counted=use.sum(axis=0),
        votes=independent.sum(axis=0),
    )
