"""Which instructions of a batch are one task: semhash proposes neighbours, the pair check decides.

1. semhash (exact ``Backend.BASIC`` search over the bundled MiniLM's vectors) lists every pair of instructions
   whose cosine reaches ``threshold``: the candidates.
2. :func:`~ptfactory.filters.dedup.semantic_check.check_pairs` judges each candidate pair: a paraphrase, or
   two tasks (other numbers, names, a substituted or swapped word on one template).
3. Instructions are taken in priority order (the caller's: a reference first, then the lowest sample id); each
   joins the most similar earlier representative it was judged a paraphrase of, else represents itself, as
   semhash's own selection does (no chains: a member is always a direct neighbour of its representative).
   A join is refused when it would put two instructions judged to be two tasks in one group: neither the
   instruction nor one of its paraphrases may contradict a member of the group. So "product of a list"
   worded anew, close by cosine to "sum of a list", stays apart when the batch also holds "product of a list"
   worded on the sum's template.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ptfactory.filters.dedup.semantic_check import PairVerdict, check_pairs

__all__ = ["candidate_pairs", "merge_within"]


def candidate_pairs(
    prompts: Sequence[str], vectors: np.ndarray, threshold: float
) -> dict[tuple[int, int], float]:
    """(i, j) with i < j -> cosine, for every pair at or above ``threshold`` (semhash, exact search)."""
    from semhash import SemHash
    from vicinity import Backend

    if len(prompts) < 2:
        return {}
    if len(set(prompts)) != len(prompts):
        raise ValueError("candidate_pairs needs distinct instructions (group identical ones first)")

    class _Given:  # semhash wants an encoder; the vectors are already there
        def encode(self, sentences: Sequence[str], **_: Any) -> np.ndarray:
            raise RuntimeError("vectors are given")

    records = [{"text": p} for p in prompts]
    index = SemHash.from_embeddings(
        vectors, records, _Given(), columns=["text"], ann_backend=Backend.BASIC
    ).index
    found: dict[tuple[int, int], float] = {}
    for i, (neighbours, scores) in enumerate(index.query_threshold(vectors, threshold=threshold)):
        for j, score in zip(np.asarray(neighbours).tolist(), np.asarray(scores).tolist(), strict=True):
            if j != i:
                found[(min(i, j), max(i, j))] = round(float(score), 4)
    return found


def merge_within(
    prompts: Sequence[str],
    vectors: np.ndarray,
    encode: Callable[[list[str]], np.ndarray],
    *,
    threshold: float,
    min_alignment: float,
    min_substitution: float,
) -> dict[int, tuple[int, float]]:
    """Dropped instruction -> (its representative, cosine), ``prompts`` in priority order."""
    scores = candidate_pairs(prompts, vectors, threshold)
    keys = sorted(scores)
    verdicts: dict[tuple[int, int], PairVerdict] = dict(
        zip(
            keys,
            check_pairs([(prompts[i], prompts[j]) for i, j in keys], encode, min_alignment, min_substitution),
            strict=True,
        )
    )
    same: dict[int, set[int]] = {}
    apart: dict[int, set[int]] = {}
    for (i, j), verdict in verdicts.items():
        side = same if verdict.same else apart
        side.setdefault(i, set()).add(j)
        side.setdefault(j, set()).add(i)
    members: dict[int, list[int]] = {}
    merged: dict[int, tuple[int, float]] = {}
    for i in range(len(prompts)):
        options = sorted(
            (r for r in same.get(i, ()) if r < i and r in members), key=lambda r: -scores[(r, i)]
        )
        for rep in options:
            group = members[rep]
            # neither i nor a paraphrase of i at least as close to it as rep may contradict a member
            link = scores[(rep, i)]
            closer = [k for k in same.get(i, ()) if scores[(min(i, k), max(i, k))] >= link]
            if any(m in apart.get(k, ()) for k in (i, *closer) for m in group):
                continue
            group.append(i)
            merged[i] = (rep, scores[(rep, i)])
            break
        else:
            members[i] = [i]
    return merged
