"""A deterministic train/validation split that keeps every dedup cluster on one side.

A row's side is a hash of its cluster key (the dedup representative's id; for a preference pair
made from an expert's correction, its parent's), so near duplicates, and a pair and the answer it
came from, never straddle the split, and the same row lands on the same side in every version.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["cluster_key", "cluster_leaks", "held_out", "split_table"]


def cluster_key(row: dict[str, Any]) -> str:
    dedup = (row.get("scores") or {}).get("dedup") or {}
    parent = (row.get("provenance") or {}).get("parent_id")
    return str(
        dedup.get("representative_id")
        or (parent if row.get("kind") == "preference" else None)
        or row["sample_id"]
    )


def _validation(key: str, fraction: float, salt: str) -> bool:
    digest = hashlib.blake2b(f"{salt}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < fraction


def held_out(table: pa.Table, fraction: float = 0.1, salt: str = "ptf-split/1") -> pa.Array:
    """True for each row whose cluster falls on the validation side (a row's side is its own:
    the same row gets the same answer in any table)."""
    rows = table.select([c for c in ("sample_id", "kind", "scores", "provenance") if c in table.column_names])
    return pa.array([_validation(cluster_key(r), fraction, salt) for r in rows.to_pylist()], pa.bool_())


def split_table(table: pa.Table, fraction: float = 0.1, salt: str = "ptf-split/1") -> dict[str, pa.Table]:
    """``{"train": ..., "validation": ...}``; ``validation`` is left out when no row falls there."""
    mask = held_out(table, fraction, salt)
    train, validation = table.filter(pc.invert(mask)), table.filter(mask)
    if train.num_rows == 0 or validation.num_rows == 0:
        return {"train": table}  # too few clusters to hold any out
    return {"train": train, "validation": validation}


def cluster_leaks(splits: dict[str, pa.Table]) -> list[str]:
    """Cluster keys found on more than one side (should be none)."""
    sides: dict[str, set[str]] = defaultdict(set)
    for name, table in splits.items():
        cols = [c for c in ("sample_id", "kind", "scores", "provenance") if c in table.column_names]
        for row in table.select(cols).to_pylist():
            sides[cluster_key(row)].add(name)
    return sorted(key for key, names in sides.items() if len(names) > 1)
