"""Text → shingle hashes → MinHash signatures, vectorized (polars for text, numpy for hashing).

Tokenizing is the bottleneck of MinHash dedup in Python, so it never runs per document in
Python: polars normalizes (NFKC, lower case, punctuation → space) and splits into words for a
whole chunk at once, and word 5-grams are hashed by combining word hashes with numpy.

Signatures are one-permutation MinHash (Li, Owen & Zhang, 2012): each shingle is hashed once
and lands in one of ``num_perm`` bins, the signature keeps the minimum per bin, and empty
bins are filled by optimal densification (Shrivastava, 2017) so that, as with ``num_perm``
independent permutations, two signatures agree in a position with probability equal to the
Jaccard similarity of the shingle sets. The cost is O(shingles), not O(shingles × num_perm).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

__all__ = ["normalized", "shingle_hashes", "signatures"]

EMPTY = np.uint32(0xFFFFFFFF)
_PRIME = np.uint64(0x100000001B3)
_TRIES = 32


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: turns structured 64-bit values into uniform ones."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def normalized(texts: pa.Array | pa.ChunkedArray | list[str | None]) -> pl.Series:
    """NFKC, lower case, punctuation as spaces, whitespace collapsed."""
    series = pl.Series("text", texts, dtype=pl.String).fill_null("")
    return (
        series.str.normalize("NFKC")
        .str.to_lowercase()
        .str.replace_all(r"[^\w\s]", " ")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


def shingle_hashes(texts: pl.Series, ngram: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(document index, 64-bit hash) of every word ``ngram``-gram of normalized ``texts``.

    A document shorter than ``ngram`` words is one shingle (all its words); an empty one has none.
    """
    words = texts.str.split(" ").list.eval(pl.element().filter(pl.element() != ""))
    lengths = words.list.len().to_numpy().astype(np.int64)
    flat = words.explode().drop_nulls()
    word_hash = flat.hash(seed=seed).to_numpy().astype(np.uint64, copy=False)
    doc_of_word = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(lengths) else np.zeros(0, np.int64)

    count = len(word_hash) - ngram + 1
    docs, hashes = [], []
    if count > 0:
        acc = word_hash[:count].copy()
        for j in range(1, ngram):
            acc = (acc * _PRIME) ^ word_hash[j : j + count]
        valid = doc_of_word[:count] == doc_of_word[ngram - 1 : ngram - 1 + count]
        docs.append(doc_of_word[:count][valid])
        hashes.append(acc[valid])
    short = np.nonzero((lengths > 0) & (lengths < ngram))[0]
    for length in np.unique(lengths[short]):
        members = short[lengths[short] == length]
        acc = word_hash[starts[members]].copy()
        for j in range(1, int(length)):
            acc = (acc * _PRIME) ^ word_hash[starts[members] + j]
        docs.append(members)
        hashes.append(acc ^ np.uint64(length))
    if not docs:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    return np.concatenate(docs), _mix(np.concatenate(hashes))


def _densify_plan(num_perm: int, seed: int) -> np.ndarray:
    """For each bin, the bins to borrow from when it is empty: the same for every document."""
    rng = np.random.default_rng(seed + 7919)
    return rng.integers(0, num_perm, size=(num_perm, _TRIES), dtype=np.int64)


def signatures(docs: np.ndarray, hashes: np.ndarray, n_docs: int, num_perm: int, seed: int) -> np.ndarray:
    """``uint32[n_docs, num_perm]`` one-permutation MinHash signatures with optimal densification.

    Documents without shingles (empty text) get all-``EMPTY`` signatures and match nothing.
    """
    bins = ((hashes >> np.uint64(32)) * np.uint64(num_perm)) >> np.uint64(32)
    values = (hashes & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    values = np.minimum(values, EMPTY - np.uint32(1))  # EMPTY is reserved for "no shingle here"
    flat = np.full(n_docs * num_perm, EMPTY, dtype=np.uint32)
    np.minimum.at(flat, docs * num_perm + bins.astype(np.int64), values)
    sig = flat.reshape(n_docs, num_perm)

    empty = sig == EMPTY
    if empty.any():
        plan = _densify_plan(num_perm, seed)
        rows = np.nonzero(empty.any(axis=1) & ~empty.all(axis=1))[0]
        for start in range(0, len(rows), 4096):
            part = rows[start : start + 4096]
            block = sig[part]
            block_empty = block == EMPTY
            tries = block[:, plan]  # [docs, num_perm, tries]
            found = tries != EMPTY
            first = found.argmax(axis=2)
            ok = found.any(axis=2)
            # The offset keeps a borrowed value distinct from the bin it came from.
            borrowed = np.take_along_axis(tries, first[..., None], axis=2)[..., 0]
            borrowed = borrowed ^ ((first.astype(np.uint32) + 1) * np.uint32(0x9E3779B1))
            fill = block_empty & ok
            block[fill] = borrowed[fill]
            still = block == EMPTY
            if still.any():  # very short documents: rotate to the next filled bin on the right
                block = _rotate_fill(block, still)
            sig[part] = block
    return sig


def _rotate_fill(block: np.ndarray, empty: np.ndarray) -> np.ndarray:
    width = block.shape[1]
    index = np.where(~empty, np.arange(width), 2 * width)
    doubled = np.concatenate([index, index + width], axis=1)
    nearest = np.minimum.accumulate(doubled[:, ::-1], axis=1)[:, ::-1][:, :width]
    source = nearest % width
    distance = (nearest - np.arange(width)).astype(np.uint32)
    filled = np.take_along_axis(block, source, axis=1) ^ (distance * np.uint32(0x85EBCA6B))
    return np.where(empty, filled, block)
