"""The table `ptf run` ends with: rows per stage, drops per reason, tokens, estimated cost, wall time."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["StageLine", "drop_reasons", "stage_lines"]

# the graph's order; assets a run did not materialize are left out
STAGES = (
    "seed_tasks",
    "candidate_instructions",
    "candidate_responses",
    "deduplicated_samples",
    "execution_validated",
    "difficulty_scored",
    "judged_samples",
    "routed_samples",
    "human_labels",
    "curated_samples",
    "sft_dataset",
    "preference_dataset",
)


@dataclass
class StageLine:
    asset: str
    rows: int | None
    tokens: int
    cost_usd: float
    seconds: float | None


def stage_lines(
    materializations: dict[str, dict[str, Any]], step_seconds: dict[str, float]
) -> list[StageLine]:
    lines = []
    for asset in STAGES:
        meta = materializations.get(asset)
        if meta is None:
            continue
        rows = meta.get("dagster/row_count")
        lines.append(
            StageLine(
                asset,
                int(rows) if rows is not None else None,
                int(meta.get("prompt_tokens", 0) or 0) + int(meta.get("completion_tokens", 0) or 0),
                float(meta.get("estimated_cost_usd", 0.0) or 0.0),
                step_seconds.get(asset),
            )
        )
    return lines


def drop_reasons(table: pa.Table) -> Counter[str]:
    """``stage: reason`` → rows dropped there, over a stage output's decision trails."""
    counts: Counter[str] = Counter()
    for trail in table.column("decisions").to_pylist():
        for decision in trail or []:
            if decision["verdict"] in ("drop", "reject"):
                counts[f"{decision['stage']}: {decision['reason']}"] += 1
                break
    return counts
