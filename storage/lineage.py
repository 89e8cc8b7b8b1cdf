"""``ptf lineage``: every version, shard and row holding a sample, its trail through the stages, and
the retractions that took it out of a version (or keep it out)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from ptfactory.errors import DatasetRefError
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.retract import retractions_of
from ptfactory.storage.versions import DatasetStore

__all__ = ["evaluations_of", "lineage"]

_MIN_PREFIX = 6


def _resolve_id(sample_id: str, datasets: DatasetStore, assets: AssetStore) -> str:
    """Accept a unique prefix (as ``git`` does) as well as a full id."""
    if len(sample_id) >= 32:
        return sample_id
    if len(sample_id) < _MIN_PREFIX:
        raise DatasetRefError(f"sample id {sample_id!r} is too short; give at least {_MIN_PREFIX} characters")
    found = {
        row[0]
        for row in datasets.catalog.query(
            "SELECT DISTINCT sample_id FROM samples WHERE starts_with(sample_id, ?) LIMIT 3",
            [sample_id],
        )
    }
    if not found:
        for path in assets.files():
            table = _scan(assets, path, pc.starts_with(pc.field("sample_id"), sample_id), ["sample_id"])
            found.update(table.column("sample_id").to_pylist())
            if len(found) > 1:
                break
    if len(found) > 1:
        raise DatasetRefError(f"sample id prefix {sample_id!r} is ambiguous: {', '.join(sorted(found))}")
    return found.pop() if found else sample_id


def _scan(assets: AssetStore, path: str, expr: pc.Expression, columns: list[str] | None = None) -> pa.Table:
    """Rows of one stage output matching ``expr``; outputs without a sample_id column match nothing."""
    # local files through Arrow's own filesystem: an fsspec one is called back from Arrow's I/O
    # threads, which can abort the process at exit (see Store.read_table)
    filesystem = None if assets.store.local else assets.store.fs
    dataset = pads.dataset(path, format="parquet", filesystem=filesystem)
    if "sample_id" not in dataset.schema.names:
        return pa.table({"sample_id": pa.array([], pa.string())})
    return dataset.to_table(filter=expr, columns=columns)


def evaluations_of(datasets: DatasetStore, name: str, version: int) -> list[dict[str, Any]]:
    """The evaluations (``ptf eval``) of models trained on ``name`` vN, oldest first."""
    import json

    exists = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'evaluations'"
    if datasets.catalog.query(exists) in ([], [(0,)]):  # a catalog from before evaluations
        return []
    found = datasets.catalog.query(
        "SELECT run_id, model, checkpoint, training_run_id, tasks, success_rate, summary, report, created_at "
        "FROM evaluations WHERE dataset = ? AND version = ? ORDER BY created_at",
        [name, version],
    )
    out = []
    for run_id, model, checkpoint, training, tasks, rate, summary, report, created in found:
        overall = json.loads(summary or "{}")
        out.append(
            {
                "run_id": run_id,
                "model": model,
                "checkpoint": checkpoint,
                "training_run_id": training,
                "dataset": name,
                "version": version,
                "tasks": json.loads(tasks or "[]"),
                "success_rate": rate,
                "ci95": overall.get("ci95"),
                "report": report,
                "created_at": created,
            }
        )
    return out


def lineage(sample_id: str, datasets: DatasetStore, assets: AssetStore) -> dict[str, Any]:
    """The whole story of one sample, as plain data (the CLI renders it or prints JSON)."""
    datasets.sync_catalog()
    sid = _resolve_id(sample_id, datasets, assets)
    placements = datasets.catalog.locate(sid)
    record: dict[str, Any] | None = None
    for place in placements:
        manifest = datasets.manifest(place["dataset"], place["version"])
        directory = datasets.version_dir(manifest.name, manifest.version)
        shard = next(s for s in manifest.shards if s.file == place["shard"])
        split = next((k for k, files in manifest.splits.items() if shard.file in files), "train")
        place["split"] = split
        place["path"] = f"{directory}/{shard.file}"
        if record is None or place is placements[-1]:
            row = datasets.store.read_table(place["path"]).slice(place["row"], 1).to_pylist()
            record = row[0] if row else record

    stages: list[dict[str, Any]] = []
    for path in assets.files():
        table = _scan(assets, path, pc.field("sample_id") == sid)
        if table.num_rows == 0:
            continue
        asset = path.rstrip("/").split("/")[-2]
        partition = path.rsplit("/", 1)[-1].removesuffix(".parquet")
        for row in table.to_pylist():
            stages.append({"asset": asset, "partition": partition, "row": row})
    if record is None and stages:
        # Unpublished: the furthest stage it reached tells its story (the longest decisions trail).
        record = max((s["row"] for s in stages), key=lambda r: len(r.get("decisions") or []))
    if not placements and not stages:
        raise DatasetRefError(
            f"sample {sample_id!r} is in no published version and no stage output under {assets.store.root}"
        )
    batches = {r["batch"] for r in [record, *(s["row"] for s in stages)] if r and r.get("batch")}
    kind = (record or {}).get("kind")
    retractions = retractions_of(datasets, sid, placements, batches, kind)
    seen = sorted({(p["dataset"], p["version"]) for p in placements})
    evaluations = [e for name, version in seen for e in evaluations_of(datasets, name, version)]
    return {
        "sample_id": sid,
        "versions": placements,
        "evaluations": evaluations,
        "stages": stages,
        "record": record,
        "retractions": retractions,
    }
