"""Near-duplicate detection: exact pass, MinHash LSH candidates, verification, union-find clusters.

The one library function behind both the ``deduplicated_samples`` asset and ``ptf dedup``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pydantic import Field

from ptfactory.filters.dedup.lsh import (
    band_keys,
    candidate_pairs,
    estimated_jaccard,
    optimal_bands,
    union_find,
)
from ptfactory.filters.dedup.minhash import EMPTY, shingle_hashes, signatures, words
from ptfactory.section import Section

# 128 agreeing-or-not positions estimate J with a standard deviation of at most ~0.044; beyond
# three of those from the threshold the estimate's verdict is as good as the exact one's.
_AMBIGUOUS = 0.13

__all__ = ["DedupConfig", "DedupResult", "Hashed", "Shingles", "compact", "compute_signatures", "deduplicate"]


class DedupConfig(Section):
    """The ``dedup`` section of factory.yaml, and what :func:`deduplicate` reads."""

    threshold: float = Field(
        0.8, gt=0, le=1, description="Jaccard of word n-gram sets that makes a duplicate"
    )
    num_perm: int = Field(128, ge=16, le=1024, description="MinHash signature length")
    ngram: int = Field(5, ge=1, le=20, description="words per shingle")
    seed: int = Field(1, description="MinHash permutation seed")
    against_published: bool = Field(True, description="also drop near duplicates of published samples")
    # LSH parameter search weights: candidates are verified, so favour recall
    fp_weight: float = Field(0.05, ge=0, le=1, description="LSH band search: weight of false positives")
    fn_weight: float = Field(0.95, ge=0, le=1, description="LSH band search: weight of false negatives")
    chunk_size: int = Field(
        2_500, gt=0, description="documents hashed per task (small tasks balance the cores)"
    )
    exact_verify_max_docs: int = Field(
        500_000, ge=0, description="beyond this many documents, verify on signatures (keeps memory flat)"
    )
    workers: int | None = Field(None, gt=0, description="hashing threads; default: the machine's cores")

    @property
    def bands(self) -> tuple[int, int]:
        return optimal_bands(self.threshold, self.num_perm, self.fp_weight, self.fn_weight)

    @property
    def threads(self) -> int:
        return self.workers or os.cpu_count() or 1


@dataclass
class Shingles:
    """Every document's set of shingle hashes (32-bit, sorted), for exact Jaccard of candidate pairs."""

    values: np.ndarray  # uint32, concatenated
    offsets: np.ndarray  # int64[n + 1]

    @classmethod
    def concat(cls, parts: list[Shingles]) -> Shingles:
        offsets = [np.zeros(1, np.int64)]
        base = 0
        for part in parts:
            offsets.append(part.offsets[1:] + base)
            base += len(part.values)
        return cls(np.concatenate([p.values for p in parts]), np.concatenate(offsets))

    def jaccard(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        out = np.empty(len(left), dtype=np.float64)
        for start in range(0, len(left), 4096):
            a, b = left[start : start + 4096], right[start : start + 4096]
            la = self.offsets[a + 1] - self.offsets[a]
            lb = self.offsets[b + 1] - self.offsets[b]
            pair = np.arange(len(a), dtype=np.uint64)
            keys = np.concatenate(
                [
                    (np.repeat(pair, la) << np.uint64(32)) | self._gather(a, la).astype(np.uint64),
                    (np.repeat(pair, lb) << np.uint64(32)) | self._gather(b, lb).astype(np.uint64),
                ]
            )
            keys.sort()
            dup = keys[1:] == keys[:-1]  # within one side values are unique: a repeat is a shared shingle
            inter = np.bincount((keys[1:][dup] >> np.uint64(32)).astype(np.int64), minlength=len(a))
            union = la + lb - inter
            out[start : start + len(a)] = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
        return out

    def _gather(self, docs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        starts = np.repeat(self.offsets[docs], lengths)
        within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return self.values[starts + within]


@dataclass
class DedupResult:
    cluster: np.ndarray  # int64: index of the cluster's representative (itself for a kept row)
    representative: np.ndarray  # bool: the row is kept
    jaccard: np.ndarray  # float64: estimated Jaccard to the representative (1.0 for itself)
    reason: list[str]  # unique | representative | exact_duplicate | near_duplicate
    signatures: np.ndarray  # uint32[n, num_perm]
    seconds: float = 0.0

    @property
    def stats(self) -> dict[str, int]:
        sizes = Counter(self.cluster.tolist())
        return {
            "rows_in": len(self.cluster),
            "rows_out": int(self.representative.sum()),
            "clusters": sum(1 for size in sizes.values() if size > 1),
            "largest_cluster": max(sizes.values(), default=0),
        }


@dataclass
class Hashed:
    signatures: np.ndarray  # uint32[n, num_perm], or uint8 (b-bit, see ``compact``)
    exact: np.ndarray  # uint64[n]: hash of the normalized text
    shingles: Shingles | None  # kept when the caller wants exact verification
    keys: np.ndarray | None = None  # LSH band keys, when computed batch by batch
    usable: np.ndarray | None = None  # bool[n]: the text had shingles


# b-bit MinHash (Li & König): the low 8 bits of each value still estimate J once the chance
# agreement of two different values (1/256) is taken out; a quarter of the memory of 32 bits.
_BBIT_CHANCE = 1 / 256


def compact(hashed: Hashed, config: DedupConfig, bbit: bool) -> Hashed:
    """Band keys (32-bit) and the usable mask from full signatures, for one batch; with ``bbit``
    the signatures shrink to their low 8 bits. What a streamed file keeps per row: ~200 bytes
    instead of the 512 of a 128-value signature (and no copies of it at clustering time)."""
    sig = hashed.signatures
    bands, rows = config.bands
    wide = band_keys(sig, bands, rows)
    keys = ((wide >> np.uint64(32)) ^ wide).astype(np.uint32)  # a 32-bit key: rare false candidates, verified
    usable = (sig != EMPTY).any(axis=1)
    small = (sig & np.uint32(0xFF)).astype(np.uint8) if bbit else sig
    return Hashed(small, hashed.exact, hashed.shingles, keys, usable)


def _chunk_signatures(texts: pa.Array, config: DedupConfig, keep_shingles: bool) -> Hashed:
    flat, lengths = words(texts)
    docs, hashes, exact = shingle_hashes(flat, lengths, config.ngram, config.seed)
    sig = signatures(docs, hashes, len(lengths), config.num_perm, config.seed)
    shingles = None
    if keep_shingles:
        key = (docs.astype(np.uint64) << np.uint64(32)) | (hashes >> np.uint64(32))
        key.sort()
        key = key[np.concatenate(([True], key[1:] != key[:-1]))] if len(key) else key
        counts = np.bincount((key >> np.uint64(32)).astype(np.int64), minlength=len(lengths))
        small = (key & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        shingles = Shingles(small, np.concatenate(([0], np.cumsum(counts))).astype(np.int64))
    return Hashed(sig, exact, shingles)


def compute_signatures(
    texts: pa.Array | pa.ChunkedArray | list[str | None], config: DedupConfig, keep_shingles: bool = False
) -> Hashed:
    """Signatures and exact-text keys (and shingle sets if asked), chunks hashed in parallel."""
    array = texts if isinstance(texts, pa.Array | pa.ChunkedArray) else pa.array(texts, pa.string())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    chunks = [array.slice(s, config.chunk_size) for s in range(0, len(array), config.chunk_size)] or [array]
    # polars and numpy release the GIL, so threads use every core without copying the texts
    with ThreadPoolExecutor(max_workers=max(1, min(config.threads, len(chunks)))) as pool:
        parts = list(pool.map(lambda chunk: _chunk_signatures(chunk, config, keep_shingles), chunks))
    shingles = Shingles.concat([p.shingles for p in parts if p.shingles]) if keep_shingles else None
    return Hashed(
        np.concatenate([p.signatures for p in parts]), np.concatenate([p.exact for p in parts]), shingles
    )


def deduplicate(
    texts: pa.Array | pa.ChunkedArray | list[str | None],
    config: DedupConfig | None = None,
    priority: np.ndarray | None = None,
    hashed: Hashed | None = None,
    candidates: Callable[[np.ndarray], np.ndarray] | None = None,
) -> DedupResult:
    """Cluster near-duplicate ``texts``; each cluster keeps the row with the lowest ``priority``
    (default: the first row), so the keeper is deterministic.

    Candidates come from LSH over the signatures and are verified on the exact Jaccard of the
    shingle sets (or, past ``exact_verify_max_docs``, on the signatures' estimate). Union-find
    joins verified pairs into components; within a component the best-ranked row keeps every
    row verified similar *to it*, and the rest form further clusters the same way, so a dropped
    row is always a near duplicate of the row that was kept for it, not merely of a neighbour.

    ``candidates``, given the rows that take part in LSH (exact-unique, with shingles), returns
    the pairs of positions among them that share a band bucket, as :func:`candidate_pairs` would:
    how the Ray path (:mod:`ptfactory.filters.dedup.distributed`) plugs in its band shuffle while
    every rule below stays here.
    """
    config = config or DedupConfig()
    started = time.perf_counter()
    if hashed is None:
        hashed = compute_signatures(texts, config, keep_shingles=len(texts) <= config.exact_verify_max_docs)
    sig, exact, shingles = hashed.signatures, hashed.exact, hashed.shingles
    n = len(sig)

    def similarity(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """The signatures' estimate; exact Jaccard where the estimate is too close to call."""
        score = estimated_jaccard(sig[left], sig[right])
        if sig.dtype == np.uint8:
            score = np.clip((score - _BBIT_CHANCE) / (1 - _BBIT_CHANCE), 0.0, 1.0)
        if shingles is not None:
            close = np.abs(score - config.threshold) < _AMBIGUOUS
            score[close] = shingles.jaccard(left[close], right[close])
        return score

    rank = (
        np.arange(n) if priority is None else np.argsort(np.argsort(priority, kind="stable"), kind="stable")
    )

    # 1. exact duplicates of the normalized text: the best-ranked copy stands for all of them
    order = np.lexsort((rank, exact))
    sorted_exact = exact[order]
    heads = np.concatenate(([True], sorted_exact[1:] != sorted_exact[:-1])) if n else np.zeros(0, bool)
    del sorted_exact
    head_of = np.empty(n, dtype=np.int64)
    head_of[order] = order[np.maximum.accumulate(np.where(heads, np.arange(n), 0))]
    del order, heads  # a million rows make every int64 temporary 8 MB
    unique = np.nonzero(head_of == np.arange(n))[0]

    # 2. near duplicates among the exact-unique rows: LSH candidates, verified
    bands, rows = config.bands
    if candidates is not None:
        usable = unique[(sig[unique] != EMPTY).any(axis=1)]
        pairs = candidates(usable)
    elif hashed.keys is not None and hashed.usable is not None:
        usable = unique[hashed.usable[unique]]
        pairs = candidate_pairs(hashed.keys[usable])
    else:
        usable = unique[(sig[unique] != EMPTY).any(axis=1)]
        pairs = candidate_pairs(band_keys(sig[usable], bands, rows))
    edges = np.zeros((0, 2), dtype=np.int64)
    if len(pairs):
        left, right = usable[pairs[:, 0]], usable[pairs[:, 1]]
        keep = similarity(left, right) >= config.threshold
        edges = np.stack([left[keep], right[keep]], axis=1)
    labels = union_find(n, edges)

    # 3. components into clusters around their best-ranked rows
    cluster = np.arange(n, dtype=np.int64)
    jaccard = np.ones(n, dtype=np.float64)
    sizes = np.bincount(labels[unique], minlength=n)
    in_groups = unique[sizes[labels[unique]] > 1]
    grouped = in_groups[np.lexsort((rank[in_groups], labels[in_groups]))]
    if len(grouped):
        # First round for every component at once: its best-ranked row keeps the rows similar to it.
        first = np.concatenate(([True], labels[grouped][1:] != labels[grouped][:-1]))
        keeper_of = grouped[first][np.cumsum(first) - 1]
        others = ~first
        score = similarity(keeper_of[others], grouped[others])
        near = score >= config.threshold
        cluster[grouped[others][near]] = keeper_of[others][near]
        jaccard[grouped[others][near]] = score[near]
        left = grouped[others][~near]  # rows joined only through a neighbour: cluster them again
        left = left[np.lexsort((rank[left], labels[left]))]
        for component in np.split(left, np.nonzero(np.diff(labels[left]))[0] + 1) if len(left) else []:
            members = component
            while len(members):
                keeper, rest = members[0], members[1:]
                score = similarity(np.full(len(rest), keeper), rest)
                near = score >= config.threshold
                cluster[rest[near]] = keeper
                jaccard[rest[near]] = score[near]
                members = rest[~near]

    # exact copies follow their head
    copies = np.nonzero(head_of != np.arange(n))[0]
    cluster[copies] = cluster[head_of[copies]]
    jaccard[copies] = jaccard[head_of[copies]]
    representative = cluster == np.arange(n)
    reason = np.array(["unique"] * n, dtype=object)
    reason[representative & (np.bincount(cluster, minlength=n) > 1)] = "representative"
    reason[~representative] = "near_duplicate"
    reason[copies[cluster[copies] == head_of[copies]]] = "exact_duplicate"
    return DedupResult(cluster, representative, jaccard, list(reason), sig, time.perf_counter() - started)
