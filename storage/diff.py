"""``ptf datasets diff``: which rows one version has that another lacks, by sample id.

A sample id is a hash of the row's content, so "added" and "removed" are content changes; a row
whose id is in both versions has the same messages (its scores or label may still differ).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.storage.versions import DatasetStore

__all__ = ["VersionDiff", "diff"]


@dataclass(frozen=True)
class VersionDiff:
    """Rows of ``new`` not in ``old`` (added) and of ``old`` not in ``new`` (removed)."""

    old: str  # NAME@vN
    new: str
    old_rows: int
    new_rows: int
    added: int
    removed: int
    unchanged: int
    added_ids: list[str]  # sorted; at most ``limit`` of them (all when limit is None)
    removed_ids: list[str]
    added_by_batch: dict[str, int] = field(default_factory=dict)
    removed_by_batch: dict[str, int] = field(default_factory=dict)
    retraction: dict[str, Any] | None = None  # the newer version's, when it was made by a retraction

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "old_rows": self.old_rows,
            "new_rows": self.new_rows,
            "added": self.added,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "added_by_batch": self.added_by_batch,
            "removed_by_batch": self.removed_by_batch,
            "added_ids": self.added_ids,
            "removed_ids": self.removed_ids,
            "retraction": self.retraction,
        }


def _only_in(left: pa.Table, right: pa.Table) -> pa.Table:
    inside = pc.is_in(left.column("sample_id"), value_set=right.column("sample_id").combine_chunks())
    return left.filter(pc.invert(inside))


def _by_batch(table: pa.Table) -> dict[str, int]:
    return dict(sorted(Counter(table.column("batch").to_pylist()).items()))


def _ids(table: pa.Table, limit: int | None) -> list[str]:
    ids = pc.sort_indices(table, [("sample_id", "ascending")])
    taken = table.column("sample_id").take(ids if limit is None else ids[:limit])
    return [str(i) for i in taken.to_pylist()]


def diff(datasets: DatasetStore, old_ref: str, new_ref: str, limit: int | None = None) -> VersionDiff:
    """Compare two versions (of one dataset or two); ``limit`` caps the ids listed, not the counts."""
    old_manifest, new_manifest = datasets.resolve(old_ref), datasets.resolve(new_ref)
    old = datasets.read(old_manifest.ref, columns=["sample_id", "batch"])
    new = datasets.read(new_manifest.ref, columns=["sample_id", "batch"])
    added, removed = _only_in(new, old), _only_in(old, new)
    return VersionDiff(
        old=old_manifest.ref,
        new=new_manifest.ref,
        old_rows=old.num_rows,
        new_rows=new.num_rows,
        added=added.num_rows,
        removed=removed.num_rows,
        unchanged=new.num_rows - added.num_rows,
        added_ids=_ids(added, limit),
        removed_ids=_ids(removed, limit),
        added_by_batch=_by_batch(added),
        removed_by_batch=_by_batch(removed),
        retraction=new_manifest.retraction,
    )
