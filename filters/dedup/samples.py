"""Dedup over sample records: what the ``deduplicated_samples`` asset runs on a batch."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.filters.dedup.core import DedupConfig, DedupResult, deduplicate
from ptfactory.filters.dedup.index import PublishedIndex
from ptfactory.storage.schema import DEDUP, add_decision, checkable_mask, dropped_mask, row_texts, set_score
from ptfactory.storage.schema.trail import rounded

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
    """Human references are kept over model samples, then rows a verifier can check (a reference
    answer, tests) over their unchecked near-copies; then the lowest sample id (order-independent).

    Arrow's sort (stable; strings by UTF-8 bytes, i.e. by code point as Python compares them)
    ranks the rows without a Python list of every row's provenance."""
    method = pc.struct_field(table.column("provenance"), "method")
    keys = pa.table(
        {
            "model": pc.invert(pc.equal(method, "reference").fill_null(False)),
            "unchecked": pa.array(~checkable_mask(table)),
            "id": table.column("sample_id"),
        }
    )
    order = pc.sort_indices(
        keys, sort_keys=[("model", "ascending"), ("unchecked", "ascending"), ("id", "ascending")]
    )
    rank = np.empty(table.num_rows, dtype=np.int64)
    rank[order.to_numpy()] = np.arange(table.num_rows)
    return rank


def _published(
    result: DedupResult, subset: pa.Table, index: PublishedIndex | None
) -> tuple[np.ndarray, np.ndarray]:
    """For each live row, the published sample its cluster's keeper matches (None) and that
    match's Jaccard (NaN): where a match exists, the whole cluster goes."""
    matched = np.full(subset.num_rows, None, dtype=object)
    jaccard = np.full(subset.num_rows, np.nan)
    if index is None or not subset.num_rows:
        return matched, jaccard
    keepers = np.nonzero(result.representative)[0]
    batches = set(subset.column("batch").unique().to_pylist())
    matches = index.query(
        result.signatures[keepers], exclude_batch=batches.pop() if len(batches) == 1 else None
    )
    for row, match in zip(keepers.tolist(), matches, strict=True):
        if match is not None:
            matched[row], jaccard[row] = match
    return matched[result.cluster], jaccard[result.cluster]


def dedup_samples(
    table: pa.Table,
    config: DedupConfig,
    index: PublishedIndex | None = None,
    engine: Callable[[pa.Array, DedupConfig, np.ndarray], DedupResult] | None = None,
) -> tuple[pa.Table, DedupStats]:
    """Every row back, with ``scores.dedup`` and a ``dedup`` decision; rows dropped upstream pass through.

    ``engine`` replaces :func:`deduplicate` with a function of the same contract (the Ray path).
    Scores and decisions are built as columns; Python formats only the details of the rows that
    were dropped or keep a cluster."""
    started = time.perf_counter()
    stats = DedupStats(rows_in=table.num_rows)
    live = np.flatnonzero(~dropped_mask(table).to_numpy(zero_copy_only=False))
    subset = table.take(pa.array(live, pa.int64()))
    result = (engine or deduplicate)(row_texts(subset), config, _priority(subset))
    ids = subset.column("sample_id").combine_chunks()
    cluster = np.asarray(result.cluster, dtype=np.int64)
    published_id, published_j = _published(result, subset, index)
    gone = ~np.isnan(published_j)  # NaN where the keeper matched nothing published
    reason = np.asarray(result.reason, dtype=object)
    reason[gone] = "near_duplicate_published"
    drop = gone | np.isin(reason, ["near_duplicate", "exact_duplicate"])
    jaccard = np.where(gone, published_j, result.jaccard)
    representative_id = np.asarray(ids.take(pa.array(cluster)).to_pylist(), dtype=object)
    representative_id[gone] = published_id[gone]
    scores = pa.StructArray.from_arrays(
        [
            pa.array(cluster, pa.int64()),
            pa.array(representative_id, pa.string()),
            pa.array(np.asarray(result.representative, dtype=bool) & ~gone, pa.bool_()),
            rounded(jaccard, np.ones(len(jaccard), dtype=bool)),
        ],
        fields=list(DEDUP),
    )
    # rows dropped upstream get no dedup score (null), as every row's score is set here
    where = np.full(table.num_rows, -1, dtype=np.int64)
    where[live] = np.arange(len(live))
    out = set_score(table, "dedup", scores.take(pa.array(where, mask=where < 0)))

    sizes = np.bincount(cluster, minlength=len(cluster))
    details = np.full(len(live), None, dtype=object)
    for position in np.flatnonzero(drop | (reason == "representative")).tolist():
        if gone[position]:
            details[position] = f"of published {published_id[position]} (J={published_j[position]:.2f})"
        elif drop[position]:
            details[position] = f"of {representative_id[position]} (J={result.jaccard[position]:.2f})"
        else:
            details[position] = f"keeps a cluster of {sizes[position]}"
    # Rows dropped upstream keep their trail as it was: dedup did not look at them.
    merged = add_decision(
        out, STAGE, np.where(drop, "drop", "keep").tolist(), reason.tolist(), details.tolist(), rows=live
    )
    stats.dropped.update(reason[drop].tolist())
    stats.rows_out = int((~drop).sum())
    stats.clusters = int((sizes > 1).sum())
    stats.largest_cluster = int(sizes.max(initial=0))
    stats.seconds = time.perf_counter() - started
    return merged, stats
