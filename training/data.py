"""A pinned dataset version → the tables TRL trains on (sha256-verified on the way in)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ptfactory.errors import UserInputError
from ptfactory.storage.manifest import MANIFEST_FILE, Manifest
from ptfactory.storage.versions import DatasetStore

__all__ = ["TrainingData", "load_training_data", "to_trl"]


@dataclass
class TrainingData:
    manifest: Manifest
    manifest_sha256: str
    train: list[dict[str, Any]]
    validation: list[dict[str, Any]]


def _prompt_and_answers(row: dict[str, Any]) -> dict[str, Any]:
    return {"prompt": row["messages"], "chosen": row["chosen"][-1:], "rejected": row["rejected"][-1:]}


def to_trl(rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """SFT: ``messages``; DPO: conversational ``prompt`` / ``chosen`` / ``rejected``."""
    if kind == "sft":
        return [
            {"messages": [{"role": m["role"], "content": m["content"]} for m in r["messages"]]} for r in rows
        ]
    return [_prompt_and_answers(r) for r in rows]


def load_training_data(datasets: DatasetStore, ref: str, kind: str) -> TrainingData:
    manifest = datasets.verify(ref)  # every shard's sha256 against the manifest, before any step
    wanted = "sft" if kind == "sft" else "preference"
    if manifest.kind != wanted:
        raise UserInputError(
            f"{manifest.ref} is a {manifest.kind} dataset; `ptf train {kind}` needs a {wanted} dataset"
        )
    raw = datasets.store.fs.cat_file(datasets.store.path(manifest.name, manifest.tag, MANIFEST_FILE))
    sha = hashlib.sha256(raw).hexdigest()
    splits = manifest.splits or {"train": [s.file for s in manifest.shards]}
    tables: dict[str, pa.Table] = {}
    for split in ("train", "validation"):
        if split in splits and manifest.splits:
            tables[split] = datasets.read(manifest.ref, split=split)
        elif split == "train":
            tables[split] = datasets.read(manifest.ref)
    train = to_trl(tables["train"].to_pylist(), kind)
    if not train:
        raise UserInputError(f"{manifest.ref} has no training rows")
    validation = to_trl(tables["validation"].to_pylist(), kind) if "validation" in tables else []
    return TrainingData(manifest, sha, train, validation)
