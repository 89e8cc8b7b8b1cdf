"""LSH banding, candidate pairs, verification and union-find clustering, all vectorized."""

from __future__ import annotations

import functools

import numpy as np
from scipy.integrate import quad

__all__ = ["band_keys", "candidate_pairs", "estimated_jaccard", "optimal_bands", "union_find"]

_PRIME = np.uint64(0x100000001B3)
_PAIR_CHUNK = 200_000
_FULL_GROUP = 32  # buckets up to this size are compared all-pairs; larger ones as a star


@functools.cache
def optimal_bands(threshold: float, num_perm: int, fp_weight: float, fn_weight: float) -> tuple[int, int]:
    """(bands, rows) minimizing the weighted false-positive and false-negative areas under the
    LSH S-curve, the search datasketch's ``MinHashLSH`` does. Candidates are verified afterwards,
    so the default weights favour recall: a false candidate costs one comparison, a missed one
    is a duplicate left in the data."""

    def false_positive(b: int, r: int) -> float:
        return quad(lambda s: 1 - (1 - s**r) ** b, 0.0, threshold)[0]

    def false_negative(b: int, r: int) -> float:
        return quad(lambda s: 1 - (1 - (1 - s**r) ** b), threshold, 1.0)[0]

    best, best_error = (1, num_perm), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            error = fp_weight * false_positive(b, r) + fn_weight * false_negative(b, r)
            if error < best_error:
                best, best_error = (b, r), error
    return best


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``uint64[n, bands]``: one hash per band of ``rows`` signature values."""
    out = np.empty((sig.shape[0], bands), dtype=np.uint64)
    wide = sig.astype(np.uint64)
    for b in range(bands):
        acc = np.full(sig.shape[0], np.uint64(b + 1), dtype=np.uint64)
        for value in wide[:, b * rows : (b + 1) * rows].T:
            acc = (acc * _PRIME) ^ value
        out[:, b] = acc
    return out


def candidate_pairs(keys: np.ndarray) -> np.ndarray:
    """``int64[pairs, 2]`` (i < j) of documents sharing a bucket in any band, each pair once."""
    found = []
    for b in range(keys.shape[1]):
        column = keys[:, b]
        order = np.argsort(column, kind="stable")
        sorted_keys = column[order]
        boundaries = np.nonzero(np.diff(sorted_keys))[0] + 1
        starts = np.concatenate(([0], boundaries))
        sizes = np.diff(np.concatenate((starts, [len(column)])))
        # Buckets of the same size are handled together: no Python loop over buckets.
        for size in np.unique(sizes[sizes > 1]):
            group_starts = starts[sizes == size]
            if size <= _FULL_GROUP:
                members = order[group_starts[:, None] + np.arange(size)]  # [buckets, size]
                i, j = _pairs_of(int(size))
                found.append(np.stack([members[:, i].ravel(), members[:, j].ravel()], axis=1))
            else:  # a huge bucket (boilerplate): link everyone to its first member
                for start in group_starts:
                    members = order[start : start + size]
                    found.append(np.stack([np.full(size - 1, members[0]), members[1:]], axis=1))
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    pairs = np.concatenate(found)
    pairs = np.sort(pairs, axis=1)
    return np.unique(pairs, axis=0)


@functools.cache
def _pairs_of(size: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(size, k=1)
    return i, j


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Fraction of agreeing signature positions, row by row."""
    out = np.empty(len(sig_a), dtype=np.float64)
    for start in range(0, len(sig_a), _PAIR_CHUNK):
        end = start + _PAIR_CHUNK
        out[start:end] = (sig_a[start:end] == sig_b[start:end]).mean(axis=1)
    return out


def union_find(n: int, edges: np.ndarray) -> np.ndarray:
    """Component label of every node: the smallest node index in its component.

    Union by minimum label with pointer jumping (path compression), vectorized over all edges
    at once; converges in O(log n) rounds.
    """
    labels = np.arange(n, dtype=np.int64)
    if len(edges) == 0:
        return labels
    a, b = edges[:, 0], edges[:, 1]
    while True:
        low = np.minimum(labels[a], labels[b])
        before = labels.copy()
        np.minimum.at(labels, labels[a], low)
        np.minimum.at(labels, labels[b], low)
        np.minimum.at(labels, a, low)
        np.minimum.at(labels, b, low)
        while True:  # path compression: point every node at its root
            jumped: np.ndarray = labels[labels]
            if np.array_equal(jumped, labels):
                break
            labels = jumped
        if np.array_equal(labels, before):
            return labels
