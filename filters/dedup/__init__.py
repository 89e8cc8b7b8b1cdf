"""MinHash near-duplicate removal: within a batch and against every published version.

Normalize (NFKC, case, punctuation, whitespace) → word n-gram shingles → one-permutation
MinHash signatures → LSH banding (bands/rows from the threshold, as datasketch searches them)
→ verified candidate pairs → union-find clusters → one deterministic keeper per cluster.
An exact-duplicate pass (hash of the normalized text) runs first.
"""

from ptfactory.filters.dedup.core import DedupConfig, DedupResult, compute_signatures, deduplicate
from ptfactory.filters.dedup.files import dedup_parquet
from ptfactory.filters.dedup.index import PublishedIndex
from ptfactory.filters.dedup.samples import DedupStats, dedup_samples

__all__ = [
    "DedupConfig",
    "DedupResult",
    "DedupStats",
    "PublishedIndex",
    "compute_signatures",
    "dedup_parquet",
    "dedup_samples",
    "deduplicate",
]
