"""Dedup over sample records: what the ``deduplicated_samples`` asset runs on a batch."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ptfactory.filters.dedup.core import DedupConfig, DedupResult, deduplicate
from ptfactory.filters.dedup.index import PublishedIndex
from ptfactory.storage.schema import add_decision, dropped_mask, row_texts, set_score

__all__ = ["DedupStats", "dedup_samples"]

STAGE = "dedup"


@dataclass
class DedupStats:
    rows_in: int = 0
    rows_out: int = 0
    clusters: int = 0
    largest_cluster: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def docs_per_s(self) -> float:
        return self.rows_in / self.seconds if self.seconds else 0.0


def _priority(table: pa.Table) -> np.ndarray:
    """Human references are kept over model samples; then the lowest sample id (order-independent)."""
    methods = [p["method"] if p else "" for p in table.column("provenance").to_pylist()]
    ids = table.column("sample_id").to_pylist()
    order = sorted(range(len(ids)), key=lambda i: (methods[i] != "reference", ids[i]))
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))
    return rank


def dedup_samples(
    table: pa.Table,
    config: DedupConfig,
    index: PublishedIndex | None = None,
    engine: Callable[[pa.Array, DedupConfig, np.ndarray], DedupResult] | None = None,
) -> tuple[pa.Table, DedupStats]:
    """Every row back, with ``scores.dedup`` and a ``dedup`` decision; rows dropped upstream pass through.

    ``engine`` replaces :func:`deduplicate` with a function of the same contract (the Ray path)."""
    started = time.perf_counter()
    stats = DedupStats(rows_in=table.num_rows)
    live = np.nonzero(~np.asarray(dropped_mask(table).to_pylist(), dtype=bool))[0]
    subset = table.take(pa.array(live, pa.int64()))
    result = (engine or deduplicate)(row_texts(subset), config, _priority(subset))
    ids = subset.column("sample_id").to_pylist()
    published: list[tuple[str, float] | None] = [None] * len(ids)
    if index is not None:
        keepers = np.nonzero(result.representative)[0]
        batches = set(subset.column("batch").to_pylist())
        matches = index.query(
            result.signatures[keepers], exclude_batch=batches.pop() if len(batches) == 1 else None
        )
        for row, match in zip(keepers, matches, strict=True):
            published[row] = match

    scores: list[dict[str, object] | None] = [None] * table.num_rows
    verdicts = ["keep"] * table.num_rows
    reasons = ["dropped_upstream"] * table.num_rows
    details: list[str | None] = [None] * table.num_rows
    sizes = Counter(result.cluster.tolist())
    for position, row in enumerate(live):
        rep = int(result.cluster[position])
        reason = result.reason[position]
        jaccard = float(result.jaccard[position])
        match = published[rep]
        scores[row] = {
            "cluster_id": rep,
            "representative_id": ids[rep],
            "is_representative": bool(result.representative[position]) and match is None,
            "jaccard": round(jaccard, 4),
        }
        if match is not None:  # the cluster's keeper is already published: the whole cluster goes
            scores[row] = {**scores[row], "representative_id": match[0], "jaccard": round(match[1], 4)}
            verdicts[row], reasons[row] = "drop", "near_duplicate_published"
            details[row] = f"of published {match[0]} (J={match[1]:.2f})"
        elif reason in ("near_duplicate", "exact_duplicate"):
            verdicts[row], reasons[row] = "drop", reason
            details[row] = f"of {ids[rep]} (J={jaccard:.2f})"
        else:
            reasons[row] = reason
            details[row] = f"keeps a cluster of {sizes[rep]}" if reason == "representative" else None
        if verdicts[row] == "drop":
            stats.dropped[reasons[row]] += 1
    out = set_score(table, "dedup", scores)
    # Rows dropped upstream keep their trail as it was: dedup did not look at them.
    live_list = [int(i) for i in live]
    merged = add_decision(
        out,
        STAGE,
        [verdicts[i] for i in live_list],
        [reasons[i] for i in live_list],
        [details[i] for i in live_list],
        rows=live_list,
    )
    stats.rows_out = int(sum(1 for i in live if verdicts[i] == "keep"))
    stats.clusters = sum(1 for s in sizes.values() if s > 1)
    stats.largest_cluster = max(sizes.values(), default=0)
    stats.seconds = time.perf_counter() - started
    return merged, stats
