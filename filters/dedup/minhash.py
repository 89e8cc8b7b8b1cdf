"""Text → shingle hashes → MinHash signatures, vectorized (polars for text, numpy for hashing).

Tokenizing is the bottleneck of MinHash dedup in Python, so it never runs per document in
Python: polars normalizes (NFKC, lower case, punctuation → space) and splits into words for a
whole chunk at once, and word 5-grams are hashed by combining word hashes with numpy.

Word hashes are XXH3-64 (polars-hash): a hash defined by its specification, so the same word hashes
the same on every machine and in every version (``polars.Series.hash`` promises neither). Its name
is :data:`SHINGLE_HASH`, recorded in the dedup index and in each manifest's dedup stats; an index
built with another hash is refused.

Signatures are one-permutation MinHash (Li, Owen & Zhang, 2012): each shingle is hashed once
and lands in one of ``num_perm`` bins, the signature keeps the minimum per bin, and empty
bins are filled by optimal densification (Shrivastava, 2017) so that, as with ``num_perm``
independent permutations, two signatures agree in a position with probability equal to the
Jaccard similarity of the shingle sets. The cost is O(shingles), not O(shingles × num_perm).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import polars_hash as plh
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "SHINGLE_HASH",
    "hash_library",
    "normalized",
    "shingle_hashes",
    "signatures",
    "word_hashes",
    "words",
]

# What the shingle hashes are built from; change it (and so force a reindex) whenever any hash below
# would change for the same text.
SHINGLE_HASH = "xxh3_64-words+fnv-ngrams+splitmix/1"

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


def _cleaned(texts: pa.Array | pa.ChunkedArray | list[str | None]) -> pl.Series:
    array = texts if isinstance(texts, pa.Array | pa.ChunkedArray) else pa.array(texts, pa.string())
    array = pc.utf8_normalize(pc.fill_null(array, ""), "NFKC")  # Arrow's NFKC has an ASCII fast path
    # One regex pass that matches only punctuation and non-space whitespace (few matches), then a
    # plain split: much faster than collapsing every run of separators with a regex.
    return pl.Series("text", array, dtype=pl.String).str.to_lowercase().str.replace_all(r"[^\w ]", " ")


def words(texts: pa.Array | pa.ChunkedArray | list[str | None]) -> tuple[pl.Series, np.ndarray]:
    """Every normalized word of every text, flattened (NFKC, lower case, split at anything that
    is not a word character), and the number of words per text."""
    tokens = _cleaned(texts).str.split(" ")
    per_text = tokens.list.len().to_numpy()
    flat = tokens.explode()
    keep = flat.str.len_bytes().to_numpy() > 0
    doc = np.repeat(np.arange(len(per_text), dtype=np.int64), per_text)[keep]
    return flat.filter(pl.Series(keep)), np.bincount(doc, minlength=len(per_text)).astype(np.int64)


def normalized(texts: pa.Array | pa.ChunkedArray | list[str | None]) -> pl.Series:
    """NFKC, lower case, punctuation as spaces, whitespace collapsed: the text dedup compares."""
    tokens = _cleaned(texts).str.split(" ")
    return tokens.list.eval(pl.element().filter(pl.element() != "")).list.join(" ")


def hash_library() -> str:
    """The library and version that computed :func:`word_hashes` (recorded beside the hash's name)."""
    from importlib.metadata import version

    return f"polars-hash {version('polars-hash')}"


def word_hashes(flat: pl.Series, seed: int) -> np.ndarray:
    """XXH3-64 of each word's UTF-8 bytes with ``seed`` (equal to ``xxhash.xxh3_64_intdigest``)."""
    column = flat.to_frame("w").select(plh.col("w").nchash.xxh3_64(seed=seed)).to_series()
    return column.to_numpy().astype(np.uint64, copy=False)


def shingle_hashes(
    flat: pl.Series, lengths: np.ndarray, ngram: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(document index, 64-bit hash) of every word ``ngram``-gram, and a hash of each whole document.

    ``flat`` and ``lengths`` come from :func:`words`. A document shorter than ``ngram`` words is one
    shingle (all its words); an empty one has none. The whole-document hash (order-sensitive, over
    the normalized words) is the key of the exact-duplicate pass.
    """
    word_hash = word_hashes(flat, seed)
    doc_of_word = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(lengths) else np.zeros(0, np.int64)
    position = np.arange(len(word_hash), dtype=np.int64) - np.repeat(starts, lengths)
    weighted = _mix(word_hash ^ _mix(position.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)))
    whole = np.zeros(len(lengths), dtype=np.uint64)
    filled = lengths > 0
    if filled.any():  # words are in document order, so a segmented sum needs no scatter
        whole[filled] = np.add.reduceat(weighted, starts[filled])
    whole = _mix(whole ^ lengths.astype(np.uint64))

    count = len(word_hash) - ngram + 1
    docs, hashes = [], []
    if count > 0:
        acc = word_hash[:count].copy()
        for j in range(1, ngram):
            acc *= _PRIME
            acc ^= word_hash[j : j + count]
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
        return np.zeros(0, np.int64), np.zeros(0, np.uint64), whole
    return np.concatenate(docs), _mix(np.concatenate(hashes)), whole


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
    partial = empty.any(axis=1) & ~empty.all(axis=1)
    if partial.any():
        plan = _densify_plan(num_perm, seed)
        rows, cols = np.nonzero(empty & partial[:, None])
        # Only the empty bins look anything up: ~15% of them for a 250-word document.
        tries = sig[rows[:, None], plan[cols]]  # [empty bins, tries]
        found = tries != EMPTY
        first = found.argmax(axis=1)
        ok = found[np.arange(len(rows)), first]
        # The offset keeps a borrowed value distinct from the bin it came from.
        borrowed = tries[np.arange(len(rows)), first] ^ (
            (first.astype(np.uint32) + 1) * np.uint32(0x9E3779B1)
        )
        sig[rows[ok], cols[ok]] = borrowed[ok]
        still = sig == EMPTY
        stuck = np.nonzero(still.any(axis=1) & partial)[0]
        if len(stuck):  # very short documents: rotate to the next filled bin on the right
            sig[stuck] = _rotate_fill(sig[stuck], still[stuck])
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
