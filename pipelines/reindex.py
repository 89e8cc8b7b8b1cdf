"""Rebuilding derived state (the dedup index) from the published versions, which are the truth."""

from __future__ import annotations

from ptfactory.config import FactoryConfig
from ptfactory.filters.dedup.core import compute_signatures
from ptfactory.filters.dedup.index import PublishedIndex
from ptfactory.storage.schema import row_texts
from ptfactory.storage.versions import DatasetStore

__all__ = ["rebuild_dedup_index"]


def rebuild_dedup_index(datasets: DatasetStore, config: FactoryConfig) -> int:
    """Index every published sample again (after a crash, a lost file, or new dedup settings)."""
    dedup = config.dedup
    path = datasets.state_dir / "dedup_index.duckdb"
    path.unlink(missing_ok=True)
    index = PublishedIndex(path, dedup)
    added = 0
    for name in datasets.names():
        for version in datasets.versions(name):
            table = datasets.read(f"{name}@v{version}", columns=["sample_id", "batch", "messages"])
            hashed = compute_signatures(row_texts(table), dedup)
            added += index.add(
                table.column("sample_id").to_pylist(),
                hashed.signatures,
                name,
                version,
                table.column("batch").to_pylist(),
            )
    return added
