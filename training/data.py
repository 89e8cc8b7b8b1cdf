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


_TOOL_KEYS = ("tool_calls", "tool_call_id", "name")


def _turns(messages: list[dict[str, Any]] | None, tools: bool) -> list[dict[str, Any]]:
    """``{role, content}`` turns; with ``tools``, every turn also carries its tool-call keys (null on
    plain turns), so one dataset's rows share one Arrow type."""
    if not tools:
        return [{"role": m["role"], "content": m["content"]} for m in messages or []]
    return [
        {"role": m["role"], "content": m["content"] or "", **{k: m.get(k) for k in _TOOL_KEYS}}
        for m in messages or []
    ]


def _prompt_and_answers(row: dict[str, Any], tools: bool) -> dict[str, Any]:
    if row.get("tools"):  # an agent pair: whole episodes after the shared prompt
        return {
            "prompt": _turns(row["messages"], tools),
            "chosen": _turns(row["chosen"], tools),
            "rejected": _turns(row["rejected"], tools),
            "tools": row["tools"],
        }
    pair = {
        "prompt": _turns(row["messages"], tools),
        "chosen": _turns(row["chosen"], tools)[-1:],
        "rejected": _turns(row["rejected"], tools)[-1:],
    }
    return {**pair, "tools": None} if tools else pair


def _rl_prompt(row: dict[str, Any]) -> dict[str, Any]:
    """GRPO: the conversational ``prompt`` (the row's turns before any answer) and ``ptf_task``,
    what the reward functions verify against (training/rewards.py)."""
    from ptfactory.training.rewards import task_column

    turns = _turns(row["messages"], False)
    while turns and turns[-1]["role"] == "assistant":
        turns.pop()
    return {"prompt": turns, "ptf_task": task_column(row)}


def to_trl(rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """SFT: ``messages``; DPO: conversational ``prompt`` / ``chosen`` / ``rejected``; GRPO:
    conversational ``prompt`` and ``ptf_task``.

    Rows with tool calls (agent trajectories; sft rows made of solved ones) keep them: assistant
    ``tool_calls`` (arguments as JSON strings), ``tool`` turns with ``tool_call_id``, and a
    ``tools`` column (JSON), which TRL's SFT trainer hands to the chat template. Datasets without
    any keep the plain ``{role, content}`` form they always had."""
    if kind == "grpo":
        return [_rl_prompt(r) for r in rows]
    tools = any(r.get("tools") for r in rows)
    if kind == "sft":
        out = []
        for r in rows:
            row: dict[str, Any] = {"messages": _turns(r["messages"], tools)}
            if tools:
                row["tools"] = r.get("tools")
            out.append(row)
        return out
    return [_prompt_and_answers(r, tools) for r in rows]


def load_training_data(datasets: DatasetStore, ref: str, kind: str) -> TrainingData:
    manifest = datasets.verify(ref)  # every shard's sha256 against the manifest, before any step
    # an agent version (verified trajectories) trains as SFT on its conversations, tool calls included
    wanted = {"sft": ("sft", "agent"), "grpo": ("rl",)}.get(kind, ("preference",))
    if manifest.kind not in wanted:
        raise UserInputError(
            f"{manifest.ref} is a {manifest.kind} dataset; `ptf train {kind}` needs a "
            f"{' or '.join(wanted)} dataset"
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
