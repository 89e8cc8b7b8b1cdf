"""The rows of a batch the panel works on: which rows it judges, the judge means of the rows each
difficulty reason dropped, and the rows preference candidates are made from.

Preference candidates (each instruction's best answer over its worst, by judge mean) obey the
verifiers: a row a verifier failed is never the chosen side, and a generator's sample is never
chosen over a row a verifier passed or a human-written one (a seed's reference): a judge may prefer
the generator's style, but a check or a person outranks it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.judges.vote_columns import gc_paused
from ptfactory.storage.schema import dropped_mask

__all__ = [
    "DIFFICULTY_STAGE",
    "judged_rows",
    "means_by_drop_reason",
    "pair_candidate_indices",
    "pair_candidate_rows",
    "pair_candidates",
    "trust_flags",
]

DIFFICULTY_STAGE = "difficulty"


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
    table: pa.Table, stage: str = DIFFICULTY_STAGE, judges: frozenset[str] | None = None
) -> dict[str, tuple[int, float | None]]:
    """Rows and mean judge mean per reason ``stage`` dropped rows for, and for the rows still live
    (``kept``): a gate that agrees with the panel drops rows the judges score lower. ``judges``:
    each row's mean over those judges' scored votes instead of the panel's mean (the LLM judges
    alone: the verifiers in the panel's mean decide the rows they check, so a figure with them in
    says little about what the rows no verifier covers get)."""
    n = table.num_rows
    if judges is None:
        means = pc.struct_field(table.column("scores").combine_chunks(), "judge_mean")
        scored = means.is_valid().to_numpy(zero_copy_only=False).astype(bool)
        values = means.fill_null(0.0).to_numpy(zero_copy_only=False)
    else:
        values, scored = _votes_mean(table, judges)
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


def _votes_mean(table: pa.Table, judges: frozenset[str]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Per row: the mean of ``judges``' parsed votes with a score (0 where none), and whether any."""
    n = table.num_rows
    votes = pc.struct_field(table.column("scores").combine_chunks(), "judges")
    flat = pc.list_flatten(votes)
    if not len(flat):
        return np.zeros(n), np.zeros(n, bool)
    parents = pc.list_parent_indices(votes).to_numpy(zero_copy_only=False)
    score = flat.field("score")
    counted = pc.and_(
        pc.and_(
            pc.is_in(flat.field("judge"), value_set=pa.array(sorted(judges), pa.string())), score.is_valid()
        ),
        flat.field("parsed"),
    ).fill_null(False)
    mask = np.asarray(counted.to_numpy(zero_copy_only=False), bool)
    values = score.fill_null(0.0).to_numpy(zero_copy_only=False)
    sums = np.bincount(parents[mask], weights=values[mask], minlength=n)
    counts = np.bincount(parents[mask], minlength=n)
    return np.divide(sums, np.maximum(counts, 1)), counts > 0


def trust_flags(table: pa.Table) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Per row: (a verifier failed it, it is trusted: a verifier passed it or no model wrote it,
    a model wrote it)."""
    n = table.num_rows
    failed, passed = np.zeros(n, bool), np.zeros(n, bool)
    verifiers = pc.struct_field(table.column("scores"), "verifiers")
    verifiers = verifiers.combine_chunks() if isinstance(verifiers, pa.ChunkedArray) else verifiers
    flat = pc.list_flatten(verifiers)
    if len(flat):
        parents = pc.list_parent_indices(verifiers).to_numpy(zero_copy_only=False)
        verdict = flat.field("verdict")
        failed[parents[pc.equal(verdict, "fail").fill_null(False).to_numpy(zero_copy_only=False)]] = True
        passed[parents[pc.equal(verdict, "pass").fill_null(False).to_numpy(zero_copy_only=False)]] = True
    model = pc.struct_field(table.column("provenance"), "model")
    generated = pc.and_(model.is_valid(), pc.not_equal(model, "")).fill_null(False)
    written = np.asarray(generated.to_numpy(zero_copy_only=False), bool)
    return failed, (passed & ~failed) | ~written, written


def pair_candidates(table: pa.Table, margin: float) -> pa.Table:
    """The rows preference candidates are made from, two a pair (chosen first, then rejected; pairs
    in the order of each instruction's first answer): :func:`pair_candidate_indices`' rows."""
    pairs = pair_candidate_indices(table, margin)
    return table.take(pa.array([i for pair in pairs for i in pair], pa.int64()))


def pair_candidate_indices(table: pa.Table, margin: float) -> list[tuple[int, int]]:
    """(chosen, rejected) row indices: of each instruction's live, scored sft answers
    (sharing ``provenance.parent_id``), the best by (judge mean, sample_id) among those no verifier
    failed, over the worst of all, where their means differ by at least ``margin`` and at all, and
    unless that would put a generator's sample over a trusted row (a verifier's pass, a human's
    text): then there is no pair."""
    mean = pc.struct_field(table.column("scores"), "judge_mean")
    parent = pc.struct_field(table.column("provenance"), "parent_id")
    use = pc.and_(
        pc.and_(pc.equal(table.column("kind"), "sft"), pc.invert(dropped_mask(table))), mean.is_valid()
    )
    use = pc.and_(use, pc.not_equal(parent, ""))  # a parent id is set, and not empty
    rows = np.flatnonzero(use.fill_null(False).to_numpy(zero_copy_only=False))
    if len(rows) < 2:
        return []
    failed, trusted, _ = trust_flags(table)
    taken = pa.array(rows, pa.int64())
    groups = pc.dictionary_encode(parent.take(taken).combine_chunks()).indices.to_numpy(zero_copy_only=False)
    means = mean.take(taken).to_numpy(zero_copy_only=False)
    ids = table.column("sample_id").take(taken)
    ok = ~failed[rows]

    def order(*first: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        ranked = pa.table({**{f"k{i}": k for i, k in enumerate(first)}, "m": means, "s": ids, "i": rows})
        keys = [(f"k{i}", "ascending") for i in range(len(first))]
        keys += [("m", "ascending"), ("s", "ascending"), ("i", "ascending")]
        result: np.ndarray[Any, Any] = pc.sort_indices(ranked, keys).to_numpy(zero_copy_only=False)
        return result

    by_mean = order(groups)  # each group's worst first
    by_fit = order(groups, ok)  # each group's best unfailed row last (if it has one)
    group = groups[by_mean]
    starts = np.flatnonzero(np.append(True, group[1:] != group[:-1]))
    ends = np.append(starts[1:], len(by_mean)) - 1
    worst, best = by_mean[starts], by_fit[ends]  # positions in ``rows``
    gap = means[best] - means[worst]
    chosen = (best != worst) & ok[best] & (gap > 0) & (gap >= margin)
    chosen &= ~(trusted[rows[worst]] & ~trusted[rows[best]])
    first = np.minimum.reduceat(rows[by_mean], starts)  # each instruction's first answer
    picked = np.stack([rows[best], rows[worst]], axis=1)[chosen][np.argsort(first[chosen], kind="stable")]
    return [(int(b), int(w)) for b, w in picked.tolist()]


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
