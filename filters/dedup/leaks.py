"""Train/validation leaks found by MinHash LSH, independently of how the split was made.

The split keeps dedup clusters on one side, but cluster ids are positions within a batch and
collide across batches, so a check that reuses them cannot fail. This one hashes the staged
rows again and looks for any train/validation pair at or above the dedup threshold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ptfactory.filters.dedup.core import DedupConfig, compute_signatures
from ptfactory.filters.dedup.lsh import band_keys, candidate_pairs, estimated_jaccard
from ptfactory.filters.dedup.minhash import EMPTY
from ptfactory.storage.schema import row_texts

__all__ = ["Leak", "audit_texts", "split_leaks"]

_EXACT_MAX_DOCS = 200_000  # past this, pairs are judged on the signatures' estimate


@dataclass(frozen=True)
class Leak:
    train_id: str
    validation_id: str
    jaccard: float


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
    for a, b, s in zip(left[:limit], right[:limit], score[:limit], strict=True):
        held, other = (a, b) if side[a] else (b, a)
        leaks.append(Leak(str(ids[other]), str(ids[held]), round(float(s), 4)))
    return len(left), leaks
