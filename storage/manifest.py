"""The manifest of a dataset version (its source of truth) and its Hugging Face dataset card."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ptfactory.errors import ShardIntegrityError
from ptfactory.storage.shards import ShardInfo

__all__ = ["MANIFEST_FILE", "Manifest", "render_card", "schema_to_json"]

MANIFEST_FILE = "manifest.json"
FORMAT = "ptfactory.manifest/1"


def schema_to_json(schema: pa.Schema) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]


@dataclass
class Manifest:
    name: str
    version: int
    kind: str
    rows: int
    shards: list[ShardInfo]
    schema: list[dict[str, Any]]
    code_version: str
    config_hash: str
    parent: int | None = None
    dagster_run_id: str | None = None
    batches: list[str] = field(default_factory=list)
    rows_added: int = 0
    rows_removed: int = 0
    splits: dict[str, list[str]] = field(default_factory=dict)  # split -> shard files
    stats: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    # the publish-time audit: check name -> {"passed", "blocking", "detail"} (run on the staged files)
    checks: dict[str, Any] = field(default_factory=dict)
    # set on a version made by `ptf datasets retract`: {"from", "batches", "sample_ids", "rows",
    # "reason", "by", "at"}; later versions of the dataset never bring those rows back
    retraction: dict[str, Any] | None = None
    # split -> bucket count of its shards (``storage.shards.write_buckets``); a later version keeps
    # the count so unchanged buckets keep their files. Empty on versions written before buckets.
    buckets: dict[str, int] = field(default_factory=dict)
    # per id range, the rows' count and hash sum (``storage.rowsums``): how a caller holding the next
    # version's rows finds the few that changed without reading this one. None on older versions.
    row_sums: dict[str, Any] | None = None

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    @property
    def ref(self) -> str:
        return f"{self.name}@v{self.version}"

    def to_json(self) -> str:
        body = {
            "format": FORMAT,
            "name": self.name,
            "version": self.version,
            "parent": self.parent,
            "kind": self.kind,
            "rows": self.rows,
            "rows_added": self.rows_added,
            "rows_removed": self.rows_removed,
            "batches": self.batches,
            "splits": self.splits,
            "shards": [s.to_dict() for s in self.shards],
            "schema": self.schema,
            "code_version": self.code_version,
            "config_hash": self.config_hash,
            "dagster_run_id": self.dagster_run_id,
            "stats": self.stats,
            "created_at": self.created_at,
            "checks": self.checks,
            "retraction": self.retraction,
            "buckets": self.buckets,
            "row_sums": self.row_sums,
        }
        return json.dumps(body, indent=2, sort_keys=False, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = "manifest.json") -> Manifest:
        try:
            body = json.loads(text)
            return cls(
                name=body["name"],
                version=int(body["version"]),
                parent=body.get("parent"),
                kind=body["kind"],
                rows=int(body["rows"]),
                rows_added=int(body.get("rows_added", 0)),
                rows_removed=int(body.get("rows_removed", 0)),
                batches=list(body.get("batches", [])),
                splits={k: list(v) for k, v in body.get("splits", {}).items()},
                shards=[ShardInfo(**s) for s in body["shards"]],
                schema=list(body["schema"]),
                code_version=body["code_version"],
                config_hash=body["config_hash"],
                dagster_run_id=body.get("dagster_run_id"),
                stats=dict(body.get("stats", {})),
                created_at=body.get("created_at", ""),
                checks=dict(body.get("checks") or {}),
                retraction=body.get("retraction"),
                buckets={k: int(v) for k, v in (body.get("buckets") or {}).items()},
                row_sums=body.get("row_sums"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ShardIntegrityError(f"{where} is not a valid ptfactory manifest: {exc}") from exc


def render_card(manifest: Manifest) -> str:
    """A Hugging Face dataset card whose ``configs`` let ``datasets.load_dataset(DIR)`` read the version."""
    splits = manifest.splits or {"train": [s.file for s in manifest.shards]}
    data_files = "\n".join(
        f"  - split: {split}\n    path:\n" + "\n".join(f"    - {f}" for f in files)
        for split, files in splits.items()
    )
    stats = manifest.stats
    stat_lines = "\n".join(f"| {k} | {json.dumps(v, ensure_ascii=False)} |" for k, v in sorted(stats.items()))
    parent = f"v{manifest.parent}" if manifest.parent is not None else "none"
    return f"""---
configs:
- config_name: default
  data_files:
{data_files}
tags:
- ptfactory
- synthetic
- {manifest.kind}
---

# {manifest.name} v{manifest.version}

A {manifest.kind} dataset version published by [ptfactory](https://github.com/) on {manifest.created_at}.
Every row carries its full trail: `provenance` (generator, template, engine, model, sampling
parameters, seed task), `scores` (dedup, execution, difficulty, judges), `decisions` (why it
was kept) and `annotation` (what a human said). `ptf lineage SAMPLE_ID` explains any row.

| | |
|---|---|
| rows | {manifest.rows} |
| parent | {parent} (+{manifest.rows_added} / -{manifest.rows_removed} rows) |
| batches | {", ".join(manifest.batches) or "none"} |
| shards | {len(manifest.shards)} |
| code version | `{manifest.code_version}` |
| config hash | `{manifest.config_hash}` |
| Dagster run | `{manifest.dagster_run_id or "none"}` |

## Load it

```python
from datasets import load_dataset
ds = load_dataset("parquet", data_files="{manifest.name}/v{manifest.version}/*.parquet")
# or: load_dataset("<this directory>")
import polars as pl
df = pl.scan_parquet("<this directory>/*.parquet")
```

## Stats

| stat | value |
|---|---|
{stat_lines}

Verify before you train: `ptf pull {manifest.name}@v{manifest.version} --to DIR` checks every
shard's sha256 against `manifest.json`.
"""
