"""Per id range, a sum of the rows' hashes: what lets a caller find the rows that changed.

A version records, for each of ``ranges`` equal ranges of the sample-id key (``bucket_of``), the
number of rows in it and the sum (mod 2^64) of their row hashes (``storage.shards.row_hashes``), over every split.
Sums do not depend on row order and can be updated by subtracting the rows taken out and adding
the rows put in, so a delta publish keeps them exact without reading the version. Comparing a
table's sums with a version's names the ranges whose rows differ; only those need reading
(``storage.changes``). ``ranges`` is the largest bucket count of the version's splits, so a range
lies inside one bucket of every split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ptfactory.storage.shards import bucket_of

__all__ = ["RowSums", "range_of", "sums_of"]

_U64 = np.uint64
_Array = np.ndarray[Any, np.dtype[Any]]


def range_of(keys: np.ndarray[Any, np.dtype[np.uint64]], ranges: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The range (of ``ranges``) each 32-bit id key falls in; bucket k of B holds ranges
    [k * ranges / B, (k + 1) * ranges / B) when both are powers of two."""
    return ((keys * _U64(ranges)) >> _U64(32)).astype(np.int64)


@dataclass(frozen=True)
class RowSums:
    ranges: int
    sums: np.ndarray[Any, np.dtype[np.uint64]]
    rows: np.ndarray[Any, np.dtype[np.int64]]

    @classmethod
    def empty(cls, ranges: int) -> RowSums:
        return cls(ranges, np.zeros(ranges, _U64), np.zeros(ranges, np.int64))

    @classmethod
    def of(cls, ranges: int, keys: _Array, hashes: _Array) -> RowSums:
        return cls.empty(ranges).plus(keys, hashes)

    def plus(self, keys: _Array, hashes: _Array, sign: int = 1) -> RowSums:
        """These sums with rows added (``sign`` 1) or taken out (-1); ``keys`` are ``bucket_of`` ids."""
        where = range_of(np.asarray(keys, _U64), self.ranges)
        part = np.zeros(self.ranges, _U64)
        np.add.at(part, where, np.asarray(hashes, _U64))  # wraps mod 2^64, as intended
        sums = self.sums + part if sign > 0 else self.sums - part
        rows = self.rows + sign * np.bincount(where, minlength=self.ranges)
        return RowSums(self.ranges, sums, rows)

    def differing(self, other: RowSums) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The ranges whose rows differ between the two (same ``ranges`` required)."""
        if other.ranges != self.ranges:
            raise ValueError(f"row sums over {self.ranges} and {other.ranges} ranges cannot be compared")
        return np.flatnonzero((self.sums != other.sums) | (self.rows != other.rows))

    def to_json(self) -> dict[str, Any]:
        return {
            "ranges": self.ranges,
            "sums": [f"{int(v):016x}" for v in self.sums],
            "rows": [int(v) for v in self.rows],
        }

    @classmethod
    def from_json(cls, body: dict[str, Any] | None) -> RowSums | None:
        if not body:
            return None
        return cls(
            int(body["ranges"]),
            np.array([int(v, 16) for v in body["sums"]], _U64),
            np.array(body["rows"], np.int64),
        )


def sums_of(tables: list[pa.Table], hashes: list[_Array], ranges: int) -> RowSums:
    """Row sums over several tables (each with its rows' hashes)."""
    total = RowSums.empty(ranges)
    for table, hashed in zip(tables, hashes, strict=True):
        if table.num_rows:
            total = total.plus(bucket_of(table.column("sample_id")), hashed)
    return total
