"""Diversity figures of a table of samples: what a manifest and an asset's metadata report.

- ``distinct_1`` / ``distinct_2``: distinct word unigrams / bigrams over all of them (Li et al. 2016),
  for instructions and for responses.
- ``dispersion``: mean cosine distance between instruction embeddings (all-MiniLM-L6-v2).
- ``vendi``: the Vendi score of the instructions (Friedman & Dieng 2023): exp of the entropy of the
  eigenvalues of the cosine kernel / n; the "effective number" of distinct instructions, 1 .. n.
- ``clusters``: distinct tasks at the semantic-dedup setting (semhash groups, the pair check).
- ``kinds`` and ``sources``: rows per kind and per generation method; ``seed_tasks``: distinct seeds.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa

from ptfactory.filters.dedup.semantic import SemanticDedupConfig
from ptfactory.filters.dedup.semantic_merge import merge_within
from ptfactory.filters.dedup.semantic_model import MiniLM, encoder
from ptfactory.storage.schema import prompt_of, response_of

__all__ = ["distinct_n", "diversity", "vendi_score"]

_WORD = re.compile(r"\w+")


def distinct_n(texts: list[str], n: int) -> float:
    """Distinct word n-grams / all word n-grams (0.0 when there are none)."""
    grams: list[tuple[str, ...]] = []
    for text in texts:
        words = _WORD.findall(text.lower())
        grams.extend(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return round(len(set(grams)) / len(grams), 4) if grams else 0.0


def vendi_score(vectors: np.ndarray) -> float:
    """exp(entropy of the eigenvalues of K/n) for the cosine kernel K of unit ``vectors``; computed on
    the d x d Gram matrix (same non-zero eigenvalues), so it costs O(n d^2), not O(n^3)."""
    n = len(vectors)
    if n == 0:
        return 0.0
    eig = np.linalg.eigvalsh((vectors.T @ vectors).astype(np.float64) / n)
    eig = eig[eig > 1e-12]
    eig = eig / eig.sum()
    return round(float(np.exp(-np.sum(eig * np.log(eig)))), 3)


def diversity(
    table: pa.Table,
    model: MiniLM | None = None,
    config: SemanticDedupConfig | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Diversity of ``table``'s rows (every row given: pass the live ones), as a JSON-ready dict.

    ``limit``: the embedding figures (dispersion, vendi, clusters) over at most this many distinct
    instructions, a sample fixed by their text's hash (``embedded`` says how many); the counts and
    distinct-n always cover every row."""
    rows = table.select(
        [c for c in ("kind", "messages", "provenance") if c in table.column_names]
    ).to_pylist()
    prompts = [prompt_of(r["messages"]) for r in rows]
    responses = [response_of(r["messages"]) for r in rows]
    distinct = sorted(set(prompts))
    figures: dict[str, Any] = {
        "rows": len(rows),
        "instructions": len(distinct),
        "distinct_1_instructions": distinct_n(prompts, 1),
        "distinct_2_instructions": distinct_n(prompts, 2),
        "distinct_1_responses": distinct_n([r for r in responses if r], 1),
        "distinct_2_responses": distinct_n([r for r in responses if r], 2),
        "kinds": dict(Counter(str(r.get("kind")) for r in rows)),
        "sources": dict(Counter(str((r.get("provenance") or {}).get("method")) for r in rows)),
        "seed_tasks": len({(r.get("provenance") or {}).get("seed_task_id") for r in rows} - {None}),
    }
    if limit is not None and len(distinct) > limit:
        distinct = sorted(distinct, key=lambda p: hashlib.sha1(p.encode()).hexdigest())[:limit]
    figures["embedded"] = len(distinct)
    if len(distinct) >= 2:
        model = model or encoder()
        vectors = model.encode(distinct)
        sims = vectors @ vectors.T
        off = ~np.eye(len(distinct), dtype=bool)
        figures["dispersion"] = round(float(1.0 - sims[off].mean()), 4)
        figures["vendi"] = vendi_score(vectors)
        setting = config or SemanticDedupConfig()
        merged = merge_within(
            distinct,
            vectors,
            model.encode,
            threshold=setting.threshold,
            min_alignment=setting.min_alignment,
            min_substitution=setting.min_substitution,
        )
        figures["clusters"] = len(distinct) - len(merged)
    else:
        figures.update(dispersion=0.0, vendi=float(len(distinct)), clusters=len(distinct))
    return figures
