"""Taking rows back out of a dataset: ``ptf datasets retract`` and what later versions must leave out.

A retraction publishes ``vN+1`` = ``vN``'s rows minus the rows of the named batches and sample ids,
in the same splits, and records in that manifest who retracted what, why and when
(``Manifest.retraction``). Versions are immutable, so ``vN`` still holds the rows (a pinned trainer
keeps reading exactly what it pinned). :func:`retracted` gathers every retraction of a dataset, so
curation leaves those rows out of every later version, and :func:`retractions_of` tells
``ptf lineage`` which retraction dropped (or keeps out) one sample.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ptfactory.errors import PublishError, UserInputError
from ptfactory.storage.jsonl import json_objects
from ptfactory.storage.stats import table_stats
from ptfactory.storage.versions import BaseMoved, DatasetStore, PublishResult

__all__ = ["Retracted", "read_sample_ids", "retract", "retracted", "retractions_of"]

# which row kinds a dataset of each kind holds (assemble_sft takes sft and code rows)
_ROW_KINDS = {"sft": ("sft", "code"), "preference": ("preference",)}
_TRIES = 20


@dataclass(frozen=True)
class Retracted:
    """Every batch and sample id retracted from a dataset, over all its versions."""

    batches: frozenset[str] = frozenset()
    sample_ids: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.batches or self.sample_ids)

    def leave_out(self, table: pa.Table) -> tuple[pa.Table, int]:
        """``table`` without its retracted rows, and how many that was."""
        if not self:
            return table, 0
        kept = table.filter(pc.invert(self.mask(table)))
        return kept, table.num_rows - kept.num_rows

    def mask(self, table: pa.Table) -> pa.Array:
        """True where a row is retracted: its ``batch`` or its ``sample_id`` was taken out.

        A table without one of those columns is matched on the other only.
        """
        mask = pa.array([False] * table.num_rows, pa.bool_())
        for column, values in (("batch", self.batches), ("sample_id", self.sample_ids)):
            if values and column in table.column_names:
                found = pc.is_in(table.column(column), value_set=pa.array(sorted(values), pa.string()))
                mask = pc.or_(mask, pc.fill_null(found, False).combine_chunks())
        return mask


def retracted(datasets: DatasetStore, name: str) -> Retracted:
    """What every retraction of ``name`` took out (empty when it has none, or no versions)."""
    batches: set[str] = set()
    ids: set[str] = set()
    for version in datasets.versions(name):
        record = datasets.manifest(name, version).retraction
        if record:
            batches.update(record.get("batches") or [])
            ids.update(record.get("sample_ids") or [])
    return Retracted(frozenset(batches), frozenset(ids))


def read_sample_ids(path: Path) -> list[str]:
    """Sample ids from a file: ``.parquet`` or ``.jsonl`` with a ``sample_id`` column, else one id a line.

    Blank lines and lines starting with ``#`` are skipped in a plain list.
    """
    if not path.is_file():
        raise UserInputError(f"--samples {path}: no such file")
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        if "sample_id" not in table.column_names:
            raise UserInputError(
                f"--samples {path} has no sample_id column (columns: {', '.join(table.column_names)})"
            )
        ids = [i for i in table.column("sample_id").to_pylist() if i]
    elif path.suffix == ".jsonl":
        ids = []
        for where, row in json_objects(path.read_bytes(), f"--samples {path}"):
            if not row.get("sample_id"):
                raise UserInputError(f"{where}: no sample_id field")
            ids.append(str(row["sample_id"]))
    else:
        lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
        ids = [line for line in lines if line and not line.startswith("#")]
    if not ids:
        raise UserInputError(f"--samples {path} holds no sample ids")
    return list(dict.fromkeys(str(i) for i in ids))


def _some_ids(ids: Sequence[str], shown: int = 5) -> str:
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return f"sample id{'s' if len(ids) > 1 else ''} {', '.join(ids[:shown])}{more}"


def retract(
    datasets: DatasetStore,
    ref: str,
    batches: Iterable[str],
    sample_ids: Iterable[str],
    *,
    reason: str,
    by: str,
) -> PublishResult:
    """Publish ``vN+1`` = ``vN`` (``ref``, the latest version) without the rows of ``batches`` and
    ``sample_ids``, in ``vN``'s splits, with a ``retraction`` record in its manifest.

    Raises :class:`UserInputError` (nothing published) when no reason is given, when ``ref`` is
    not the latest version (the new version would silently drop the versions in between), or
    when no row of ``vN`` matches.
    """
    batches = sorted(set(batches))
    sample_ids = sorted(set(sample_ids))
    if not batches and not sample_ids:
        raise UserInputError("say what to retract: --batch B (repeatable) and/or --samples FILE")
    if not reason.strip():
        raise UserInputError("say why: --reason TEXT is recorded in the manifest and shown by `ptf lineage`")
    for _ in range(_TRIES):
        try:
            return _retract_from_latest(datasets, ref, batches, sample_ids, reason=reason, by=by)
        except BaseMoved:
            # another version landed between the read and the publish: retract from it instead (a
            # ref naming the old version by number is now refused as not the latest)
            continue
    raise PublishError(f"{ref}: new versions kept landing while the retraction was made; run it again")


def _retract_from_latest(
    datasets: DatasetStore, ref: str, batches: list[str], sample_ids: list[str], *, reason: str, by: str
) -> PublishResult:
    manifest = datasets.resolve(ref)
    latest = datasets.versions(manifest.name)[-1]
    if manifest.version != latest:
        raise UserInputError(
            f"{manifest.ref} is not the latest version of {manifest.name!r} (v{latest}); retract from "
            f"{manifest.name}@v{latest} (or {manifest.name}@latest), so the rows v{manifest.version + 1}"
            f"-v{latest} added are kept"
        )
    gone = Retracted(frozenset(batches), frozenset(sample_ids))
    names = list(manifest.splits) or ["train"]
    kept: dict[str, pa.Table] = {}
    removed = 0
    before: set[str] = set()
    for split in names:
        table = datasets.read(manifest.ref, split=split) if manifest.splits else datasets.read(manifest.ref)
        mask = gone.mask(table)
        removed += int(pc.sum(mask).as_py() or 0)
        before.update(table.column("batch").to_pylist())
        kept[split] = table.filter(pc.invert(mask))
    if removed == 0:
        asked = [f"batch {b}" for b in batches] + ([_some_ids(sample_ids)] if sample_ids else [])
        raise UserInputError(
            f"{manifest.ref} has no row to retract: no row matches {' or '.join(asked)}; its batches: "
            f"{', '.join(manifest.batches) or 'none'} (nothing published)"
        )
    after = {b for t in kept.values() for b in t.column("batch").to_pylist()}
    # a batch stays listed unless it was retracted or the retracted ids took its last row
    remaining = [b for b in manifest.batches if b not in gone.batches and (b in after or b not in before)]
    fresh = table_stats(kept)
    stats = {k: v for k, v in manifest.stats.items() if k not in fresh}
    record = {
        "from": manifest.version,
        "batches": batches,
        "sample_ids": sample_ids,
        "rows": removed,
        "reason": reason.strip(),
        "by": by,
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    return datasets.publish(
        manifest.name,
        kept,
        kind=manifest.kind,
        config_hash=manifest.config_hash,
        batches=remaining,
        stats=stats,
        shard_rows=max([s.rows for s in manifest.shards] + [1]),
        audit=None,
        retraction=record,
        base=manifest.version,  # published over exactly the version read, or not at all
    )


def retractions_of(
    datasets: DatasetStore,
    sample_id: str,
    placements: Sequence[Mapping[str, Any]],
    batches: Iterable[str],
    kind: str | None,
) -> list[dict[str, Any]]:
    """The retractions that concern one sample, oldest first, for ``ptf lineage``.

    ``effect`` is ``dropped`` where the sample was in the version a retraction started from (and so
    is missing from the version it made), ``kept out`` where it was not but the retraction names it
    (its id, or its batch in a dataset of its kind), so curation leaves it out of later versions.
    """
    placed = {(str(p["dataset"]), int(p["version"])) for p in placements}
    batches = set(batches)
    found: list[dict[str, Any]] = []
    for name in datasets.names():
        for version in datasets.versions(name):
            manifest = datasets.manifest(name, version)
            record = manifest.retraction
            if not record:
                continue
            by_id = sample_id in (record.get("sample_ids") or [])
            by_batch = sorted(batches & set(record.get("batches") or []))
            if (name, int(record.get("from", -1))) in placed and (name, version) not in placed:
                effect = "dropped"
            elif by_id or (by_batch and kind in _ROW_KINDS.get(manifest.kind, (manifest.kind,))):
                effect = "kept out"
            else:
                continue
            matched = "sample id" if by_id else (f"batch {', '.join(by_batch)}" if by_batch else "")
            found.append(
                {
                    "dataset": name,
                    "version": version,
                    "from": record.get("from"),
                    "effect": effect,
                    "matched": matched,
                    "reason": record.get("reason"),
                    "by": record.get("by"),
                    "at": record.get("at"),
                }
            )
    return found
