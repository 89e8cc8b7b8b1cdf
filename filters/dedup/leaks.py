"""Train/validation leaks found by MinHash LSH, independently of how the split was made.

The split keeps dedup clusters on one side, but cluster ids are positions within a batch and
collide across batches, so a check that reuses them cannot fail. This one hashes the staged
rows again and looks for any train/validation pair at or above the dedup threshold.

A publish asks twice about the same rows: the dataset asset mends the split before staging, and
the staged version's audit checks it. The rows are the same (staging only sorts them), so the
second answer comes from a small in-process memo keyed by the rows' content and sides, not from
hashing every row again (the MinHash pass is most of a publish's time at 100k rows).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from ptfactory.filters.dedup.core import DedupConfig, compute_signatures
from ptfactory.filters.dedup.lsh import band_keys, candidate_pairs, estimated_jaccard
from ptfactory.filters.dedup.minhash import EMPTY
from ptfactory.storage.schema import row_texts

__all__ = ["Leak", "audit_texts", "split_leaks"]

_EXACT_MAX_DOCS = 200_000  # past this, pairs are judged on the signatures' estimate
_MEMO_SIZE = 4


@dataclass(frozen=True)
class Leak:
    train_id: str
    validation_id: str
    jaccard: float


# fingerprint of (settings, rows) -> every leak found, in a stable order
_memo: OrderedDict[bytes, tuple[int, list[Leak]]] = OrderedDict()


def _fingerprint(config: DedupConfig, texts: pa.Array, ids: np.ndarray, side: np.ndarray) -> bytes:
    """The same rows on the same sides give the same key whatever their order: each row's
    (text, id, side) is hashed, the hashes sorted, and digested with the settings and row count."""
    frame = pl.DataFrame({"text": pl.from_arrow(texts), "id": ids.tolist(), "side": side})
    rows = np.sort(frame.hash_rows(seed=7).to_numpy())
    digest = hashlib.blake2b(
        repr(
            ((config.threshold, config.num_perm, config.ngram, config.seed), config.bands, len(rows))
        ).encode()
    )
    digest.update(rows.tobytes())
    return digest.digest()


def audit_texts(table: pa.Table) -> pa.Array:
    """What makes two rows the same example: the conversation, and for a preference pair its
    prompt with the chosen answer (two pairs on one prompt with different answers are not)."""
    texts = row_texts(table).to_pylist()
    if "chosen" in table.column_names:
        chosen = table.column("chosen").to_pylist()
        texts = [
            "\n".join([text or "", *(m["content"] for m in answer or [])])
            for text, answer in zip(texts, chosen, strict=True)
        ]
    return pa.array(texts, pa.string())


def split_leaks(
    splits: Mapping[str, pa.Table], config: DedupConfig, held_out: str = "validation", limit: int = 20
) -> tuple[int, list[Leak]]:
    """(number of leaking pairs, the first ``limit``): pairs of a ``held_out`` row and a row of any
    other split whose Jaccard similarity is at or above ``config.threshold``."""
    if held_out not in splits or len(splits) < 2:
        return 0, []
    tables = [splits[held_out], *(t for name, t in splits.items() if name != held_out)]
    texts = pa.concat_arrays([audit_texts(t) for t in tables])
    ids = np.array([i for t in tables for i in t.column("sample_id").to_pylist()], dtype=object)
    side = np.zeros(len(texts), dtype=bool)
    side[: tables[0].num_rows] = True  # True: held out
    key = _fingerprint(config, texts, ids, side)
    if key not in _memo:
        _memo[key] = _leaks(config, texts, ids, side)
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)
    count, leaks = _memo[key]
    return count, leaks[:limit]


def _leaks(config: DedupConfig, texts: pa.Array, ids: np.ndarray, side: np.ndarray) -> tuple[int, list[Leak]]:
    hashed = compute_signatures(texts, config, keep_shingles=len(texts) <= _EXACT_MAX_DOCS)
    usable = np.nonzero((hashed.signatures != EMPTY).any(axis=1))[0]
    pairs = candidate_pairs(band_keys(hashed.signatures[usable], *config.bands))
    if not len(pairs):
        return 0, []
    left, right = usable[pairs[:, 0]], usable[pairs[:, 1]]
    crossing = side[left] != side[right]
    left, right = left[crossing], right[crossing]
    if hashed.shingles is not None:
        score = hashed.shingles.jaccard(left, right)
    else:
        score = estimated_jaccard(hashed.signatures[left], hashed.signatures[right])
    same = hashed.exact[left] == hashed.exact[right]  # identical normalized text: always a leak
    hit = (score >= config.threshold) | same
    left, right, score = left[hit], right[hit], np.where(same[hit], 1.0, score[hit])
    leaks = []
    for a, b, s in zip(left, right, score, strict=True):
        held, other = (a, b) if side[a] else (b, a)
        leaks.append(Leak(str(ids[other]), str(ids[held]), round(float(s), 4)))
    # by ids, so the examples a message names do not depend on the rows' order
    return len(leaks), sorted(leaks, key=lambda x: (x.validation_id, x.train_id))
