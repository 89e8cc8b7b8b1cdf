"""The summary statistics a manifest records about a version's rows.

Every statistic is a sum over rows (counts per kind and batch, turns, generation tokens), so a
version made by changing a few rows of its parent (``DatasetStore.publish_delta``) gets them from
the parent's by subtracting the rows it took out and adding the ones it put in
(:class:`Totals`), and gets exactly what counting every row would give.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Totals", "table_stats"]


def _counts(column: pa.ChunkedArray) -> Counter[str]:
    counted = pc.value_counts(column.combine_chunks())
    return Counter({v["values"]: v["counts"] for v in counted.to_pylist()})


def _token_sum(table: pa.Table, name: str) -> int:
    values = pc.struct_field(table.column("provenance"), name)
    return int(pc.sum(values).as_py() or 0)


@dataclass
class Totals:
    """The additive part of a version's stats."""

    rows: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    batches: Counter[str] = field(default_factory=Counter)
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @classmethod
    def of(cls, table: pa.Table) -> Totals:
        if not table.num_rows:
            return cls()
        return cls(
            rows=table.num_rows,
            kinds=_counts(table.column("kind")),
            batches=_counts(table.column("batch")),
            turns=int(pc.sum(pc.list_value_length(table.column("messages"))).as_py() or 0),
            prompt_tokens=_token_sum(table, "prompt_tokens"),
            completion_tokens=_token_sum(table, "completion_tokens"),
        )

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any]) -> Totals | None:
        """The totals a manifest recorded; None for one written before they were all kept."""
        split_rows = stats.get("rows_per_split")
        if not isinstance(split_rows, Mapping):
            return None
        rows = sum(int(v) for v in split_rows.values())
        if not rows:
            return cls()
        tokens = stats.get("generation_tokens")
        if "turns" not in stats or not isinstance(tokens, Mapping):
            return None
        return cls(
            rows=rows,
            kinds=Counter({str(k): int(v) for k, v in stats.get("rows_per_kind", {}).items()}),
            batches=Counter({str(k): int(v) for k, v in stats.get("rows_per_batch", {}).items()}),
            turns=int(stats["turns"]),
            prompt_tokens=int(tokens.get("prompt", 0)),
            completion_tokens=int(tokens.get("completion", 0)),
        )

    def __add__(self, other: Totals) -> Totals:
        return Totals(
            self.rows + other.rows,
            self.kinds + other.kinds,
            self.batches + other.batches,
            self.turns + other.turns,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    def __sub__(self, other: Totals) -> Totals:
        kinds, batches = Counter(self.kinds), Counter(self.batches)
        kinds.subtract(other.kinds)
        batches.subtract(other.batches)
        return Totals(
            self.rows - other.rows,
            +kinds,  # unary plus drops the kinds and batches no row holds any more
            +batches,
            self.turns - other.turns,
            self.prompt_tokens - other.prompt_tokens,
            self.completion_tokens - other.completion_tokens,
        )

    def render(self, split_rows: Mapping[str, int]) -> dict[str, Any]:
        stats: dict[str, Any] = {"rows_per_split": dict(split_rows)}
        if not self.rows:
            return stats
        stats["rows_per_kind"] = {k: self.kinds[k] for k in sorted(self.kinds)}
        stats["rows_per_batch"] = {k: self.batches[k] for k in sorted(self.batches)}
        stats["mean_turns"] = round(self.turns / self.rows, 3)
        stats["turns"] = self.turns
        stats["generation_tokens"] = {"prompt": self.prompt_tokens, "completion": self.completion_tokens}
        return stats


def table_stats(splits: Mapping[str, pa.Table]) -> dict[str, Any]:
    totals = Totals()
    for table in splits.values():
        totals = totals + Totals.of(table)
    return totals.render({k: t.num_rows for k, t in splits.items()})
