"""Metadata and checks every stage asset shares: previews, counts, schema and id checks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.engines.base import Engine
from ptfactory.errors import SchemaError
from ptfactory.filters.privacy import PrivacyStats
from ptfactory.storage.schema import prompt_of, response_of, validate_table

__all__ = [
    "counts_md",
    "decision_counts",
    "md_cell",
    "preview_md",
    "privacy_metadata",
    "schema_check",
    "unique_ids_check",
]

_PREVIEW_CHARS = 120


def md_cell(text: object) -> str:
    """``text`` as one markdown table cell: one line, pipes escaped, cut at 120 characters."""
    value = "" if text is None else str(text)
    value = value.replace("\n", " ").replace("|", "\\|")
    return value if len(value) <= _PREVIEW_CHARS else value[: _PREVIEW_CHARS - 1] + "…"


def preview_md(table: pa.Table, rows: int = 5) -> dg.MetadataValue:
    """The first rows as a markdown table: id, kind, prompt, response, last decision."""
    lines = ["| sample_id | kind | prompt | response | last decision |", "|---|---|---|---|---|"]
    for row in table.slice(0, rows).to_pylist():
        messages = row.get("messages")
        prompt, answer = prompt_of(messages), response_of(messages, final_turn=False)
        trail = row.get("decisions") or []
        last = f"{trail[-1]['stage']}: {trail[-1]['verdict']} ({trail[-1]['reason']})" if trail else ""
        cells = [f"`{row['sample_id'][:12]}`", row["kind"], md_cell(prompt), md_cell(answer), md_cell(last)]
        lines.append("| " + " | ".join(cells) + " |")
    return dg.MetadataValue.md("\n".join(lines))


def counts_md(counts: Counter[str] | dict[str, int], header: str = "value") -> dg.MetadataValue:
    lines = [f"| {header} | rows |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return dg.MetadataValue.md("\n".join(lines))


def decision_counts(table: pa.Table, stage: str) -> Counter[str]:
    """``verdict:reason`` counts of the decisions ``stage`` made."""
    counts: Counter[str] = Counter()
    for trail in table.column("decisions").to_pylist():
        for decision in trail or []:
            if decision["stage"] == stage:
                counts[f"{decision['verdict']}:{decision['reason']}"] += 1
    return counts


def schema_check(table: pa.Table, asset: str) -> dg.AssetCheckResult:
    try:
        validate_table(table)
    except SchemaError as exc:
        return dg.AssetCheckResult(
            check_name=f"{asset}_schema_valid", passed=False, metadata={"error": str(exc)}
        )
    return dg.AssetCheckResult(check_name=f"{asset}_schema_valid", passed=True)


def unique_ids_check(table: pa.Table, asset: str) -> dg.AssetCheckResult:
    ids = table.column("sample_id")
    distinct = pc.count_distinct(ids).as_py() if table.num_rows else 0
    return dg.AssetCheckResult(
        check_name=f"{asset}_unique_ids",
        passed=distinct == table.num_rows,
        metadata={"rows": table.num_rows, "distinct_ids": distinct},
    )


def check_specs(asset: str, names: Iterable[str], blocking: bool = False) -> list[dg.AssetCheckSpec]:
    """``blocking``: a failed check stops the run (and whatever is downstream of ``asset``)."""
    return [dg.AssetCheckSpec(f"{asset}_{name}", asset=asset, blocking=blocking) for name in names]


def engine_metadata(
    engine: Engine, before: dict[str, float], price_per_mtok: float
) -> dict[str, dg.MetadataValue]:
    """Tokens, speed, cache hit rate and estimated cost of what ``engine`` did since ``before``."""
    after = engine.stats.__dict__
    delta = {k: after[k] - before.get(k, 0) for k in after}
    tokens = delta["prompt_tokens"] + delta["completion_tokens"]
    requests = delta["requests_sent"] + delta["cache_hits"]
    return {
        "engine": dg.MetadataValue.text(f"{engine.backend}:{engine.model_id}"),
        "requests": dg.MetadataValue.int(int(requests)),
        "cache_hit_rate": dg.MetadataValue.float(
            round(delta["cache_hits"] / requests, 4) if requests else 0.0
        ),
        "prompt_tokens": dg.MetadataValue.int(int(delta["prompt_tokens"])),
        "completion_tokens": dg.MetadataValue.int(int(delta["completion_tokens"])),
        "tokens_per_s": dg.MetadataValue.float(
            round(delta["completion_tokens"] / delta["seconds"], 2) if delta["seconds"] else 0.0
        ),
        "estimated_cost_usd": dg.MetadataValue.float(round(tokens * price_per_mtok / 1e6, 6)),
    }


def privacy_metadata(stats: PrivacyStats) -> dict[str, dg.MetadataValue]:
    """What a stage redacted: rows, and counts per type (never a value)."""
    return {
        "rows_redacted": dg.MetadataValue.int(stats.rows_with_findings),
        "redactions": counts_md(stats.found, "type"),
    }
