"""What a published version records about its clean data: its diversity, the benchmark index it
was checked against, and its instructions for later batches' semantic dedup."""

from collections.abc import Mapping
from typing import Any

import dagster as dg
import pyarrow as pa

from ptfactory.assets.common import counts_md
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.config import FactoryConfig
from ptfactory.filters.decontamination import LICENCES
from ptfactory.filters.dedup.semantic_diversity import diversity

__all__ = [
    "EMBEDDED_LIMIT",
    "decontamination_stats",
    "figures_metadata",
    "remember_prompts",
    "version_diversity",
]

# distinct instructions whose embeddings the diversity figures read (a sample fixed by their text
# beyond that): MiniLM encodes ~100 a second on one thread, and every publish recomputes them
EMBEDDED_LIMIT = 2000
_SHOWN = ("distinct_2_instructions", "distinct_2_responses", "dispersion", "vendi", "clusters")


def version_diversity(table: pa.Table, config: FactoryConfig) -> dict[str, Any]:
    """``stats.diversity`` of a version holding ``table``'s rows (filters/dedup/semantic_diversity.py)."""
    return diversity(table, config=config.semantic_dedup, limit=EMBEDDED_LIMIT)


def decontamination_stats(settings: SettingsResource) -> dict[str, Any]:
    """``stats.decontamination``: the index a version was checked against (hash, n, scheme, items
    per benchmark, their licences), the same the ``no_benchmark_overlap`` audit check records."""
    config = settings.config.decontamination
    if not config.enabled:
        return {"enabled": False}
    index = settings.decontamination_index()
    summary = index.summary()
    licences = {b["name"]: b.get("licence") or LICENCES.get(b["name"], "") for b in index.benchmarks}
    return {"enabled": True, **summary, "licences": licences}


def remember_prompts(settings: SettingsResource, rows: pa.Table) -> int:
    """The instructions of ``rows`` (what a version put in) recorded for semantic dedup of later
    batches against published data; those recorded before are skipped. The number added."""
    if not rows.num_rows or not settings.config.semantic_dedup.enabled:
        return 0
    return settings.published_prompts().add(rows)


def figures_metadata(stats: Mapping[str, Any]) -> dict[str, dg.MetadataValue]:
    """A version's diversity and decontamination figures as Dagster metadata."""
    out: dict[str, dg.MetadataValue] = {}
    figures = stats.get("diversity")
    if isinstance(figures, dict):
        for key in _SHOWN:
            if isinstance(figures.get(key), int | float):
                out[f"diversity_{key}"] = dg.MetadataValue.float(float(figures[key]))
        out["diversity_kinds"] = counts_md(figures.get("kinds") or {}, "kind")
        out["diversity_sources"] = counts_md(figures.get("sources") or {}, "source")
        out["diversity"] = dg.MetadataValue.json(figures)
    decont = stats.get("decontamination")
    if isinstance(decont, dict) and decont.get("enabled"):
        out["decontamination_index"] = dg.MetadataValue.text(str(decont.get("index_hash", "")))
        out["decontamination_benchmarks"] = dg.MetadataValue.json(decont.get("benchmarks") or {})
    return out
