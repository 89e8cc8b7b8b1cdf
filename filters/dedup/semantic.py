"""Semantic (diversity) dedup: instructions that ask for the same task in other words are merged.

MinHash catches copies; it passes "Write a Python function that returns the sum of a list" beside
"Implement a function which computes the total of the numbers in a list". Here each row's instruction (its
first user turn) is embedded with the bundled all-MiniLM-L6-v2; semhash (exact ``Backend.BASIC`` search)
proposes every pair whose cosine reaches ``threshold``, and a pair check
(:mod:`~ptfactory.filters.dedup.semantic_check`) decides whether the two are one task: the cosine alone cannot,
since a template shared by two tasks ("earning more than $50,000" / "less than": 0.98) weighs more than the word
that makes them two. Groups are formed in priority order (:mod:`~ptfactory.filters.dedup.semantic_merge`);
the other instructions' rows are dropped with reason ``semantic_duplicate`` and ``{"of": <representative sample
id>, "similarity": s}`` in ``detail``, the representative's best row gets ``keep``/``semantic_representative``.

The unit is the distinct instruction, not the row: rows that share one instruction (several responses, a
preference pair), or answer one candidate instruction (a code problem's sampled responses, asked inside the
responder's template, and its reference), are one task and never merge with each other here. Representatives are chosen in priority
order: an instruction with a human reference first, then one a verifier can check, then the lowest sample id. Instructions are also compared
with those of published versions (:class:`PublishedPrompts`, a folder of embedding files written at publish
time, each with its instructions' text for the pair check): a new wording of a published task is dropped with
``of`` naming the published sample (an identical instruction is the same task again, left to MinHash's check
against published rows).

Fitted with bench/semantic_dedup.py on bench/data/paraphrase_tasks.json (77 template groups, 156 tasks, 474
phrasings of code, math and writing requests; the hard negatives are sibling tasks on one template, worded
alike or not): on the fit half of the groups (split by group, so no task or sibling crosses halves) the grid
of ``threshold`` x ``min_alignment`` x ``min_substitution`` is searched for the best F1 of the groups the
stage forms, among settings that merge at most 1% of distinct benchmark tasks (GSM8K test questions and
HumanEval prompts, even half). On the held-out half, deduplicated as one batch: precision 0.79, recall 0.61
of same-task pairs, 2 of 78 tasks left without a representative, 77 of 78 paraphrase families merged at least
once; cosine alone (fitted the same way, 0.80): precision 0.35, recall 0.27, 8 tasks lost; the previous
word-overlap guard: precision 0.56, recall 0.14. Pair by pair (held out): precision 0.63, recall 0.81.
16 of the 1,483 distinct benchmark tasks merge at the default (13 GSM8K questions that share their small
numbers and frame, 3 near-twin HumanEval stubs; each a false merge), none of the demo's 31 seed instructions.
bench/semantic_dedup.py prints these figures and the speed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ptfactory.filters.dedup.semantic_check import check_pairs
from ptfactory.filters.dedup.semantic_merge import merge_within
from ptfactory.filters.dedup.semantic_model import MiniLM, encoder
from ptfactory.section import Section
from ptfactory.storage.schema import add_decision, checkable_mask, dropped_mask, prompt_of

__all__ = [
    "PublishedPrompts",
    "SemanticDedupConfig",
    "SemanticStats",
    "semantic_dedup_samples",
    "task_groups",
]

STAGE = "semantic_dedup"
# bench/semantic_dedup.py, fit half of the labelled groups (see the module docstring)
FITTED_THRESHOLD = 0.53
FITTED_ALIGNMENT = 0.6
FITTED_SUBSTITUTION = 0.9


class SemanticDedupConfig(Section):
    """``semantic_dedup:`` in factory.yaml."""

    enabled: bool = Field(default=True, description="merge instructions that ask for the same task")
    threshold: float = Field(
        default=FITTED_THRESHOLD,
        gt=0.0,
        le=1.0,
        description="cosine similarity (all-MiniLM-L6-v2) from which two instructions are checked as one task "
        "(the pair check then decides); fitted on labelled paraphrase / hard-negative groups "
        "(bench/semantic_dedup.py)",
    )
    min_alignment: float = Field(
        default=FITTED_ALIGNMENT,
        ge=0.0,
        le=1.0,
        description="two instructions whose word sequences match at this ratio or more are one template: the "
        "spans on which they differ must then be paraphrases (min_substitution); fitted with the threshold",
    )
    min_substitution: float = Field(
        default=FITTED_SUBSTITUTION,
        ge=-1.0,
        le=1.0,
        description="cosine two differing spans of one template must reach to be the same words in other words "
        "('largest' / 'biggest'), not another task ('ascending' / 'descending'); fitted with the threshold",
    )
    published: bool = Field(
        default=True, description="also compare with the instructions of published versions"
    )


@dataclass
class SemanticStats:
    rows_in: int = 0
    tasks: int = 0  # distinct instructions among live rows
    merged: int = 0  # of them, merged into another in the batch
    published_matches: int = 0  # merged into a published task
    dropped_rows: int = 0
    seconds: float = 0.0
    pairs: list[dict[str, Any]] = field(default_factory=list)  # (dropped, kept, similarity) per merge

    def as_metadata(self) -> dict[str, Any]:
        return {
            "rows_in": self.rows_in,
            "tasks": self.tasks,
            "merged_in_batch": self.merged,
            "merged_with_published": self.published_matches,
            "dropped_rows": self.dropped_rows,
            "seconds": round(self.seconds, 3),
        }


def _key(prompt: str) -> str:
    return hashlib.sha1(" ".join(prompt.lower().split()).encode()).hexdigest()


# rows made from one candidate instruction (its parent): one task, however their prompts are worded
_FROM_PARENT = ("response", "reference")


def task_groups(table: pa.Table, rows: np.ndarray) -> tuple[list[str], list[str], list[list[int]]]:
    """The distinct instructions of ``rows`` in priority order: (prompt, its best row's sample id,
    the rows holding it). Priority: a reference row first, then a row a verifier can check (a
    reference answer, a procedural task, constraints, tests: a paraphrase derived from it has
    none), then the lowest sample id.

    Rows answering one candidate instruction (``provenance.parent_id`` of a response or reference
    row) are one task even where their prompts differ: a code row is asked inside the responder's
    template, its reference holds the bare problem. The group's prompt is its best row's."""
    provenance = table.column("provenance") if "provenance" in table.column_names else None
    method = (
        pc.struct_field(provenance, "method").to_pylist()
        if provenance is not None
        else [None] * table.num_rows
    )
    parent = (
        pc.struct_field(provenance, "parent_id").to_pylist()
        if provenance is not None
        else [None] * table.num_rows
    )
    ids = table.column("sample_id").to_pylist()
    messages = table.column("messages").to_pylist()
    checkable = checkable_mask(table).tolist()

    def rank(row: int) -> tuple[bool, bool, str]:
        return (method[row] != "reference", not checkable[row], ids[row])

    groups: dict[str, list[int]] = {}
    prompts: dict[str, str] = {}
    by_parent: dict[str, str] = {}
    for row in sorted(rows.tolist(), key=rank):  # best rows first: they name their group's prompt
        prompt = prompt_of(messages[row])
        key = _key(prompt)
        origin = parent[row] if method[row] in _FROM_PARENT else None
        if origin is not None:
            key = by_parent.setdefault(origin, key)
        groups.setdefault(key, []).append(row)
        prompts.setdefault(key, prompt)

    ordered = sorted(groups, key=lambda k: min(rank(r) for r in groups[k]))
    best = [min(groups[k], key=rank) for k in ordered]
    return (
        [prompts[k] for k in ordered],
        [ids[b] for b in best],
        [sorted(groups[k], key=rank) for k in ordered],
    )


class PublishedPrompts:
    """Embeddings of the instructions of published rows: ``<root>/<model>/<publish>.npz`` files (vectors,
    sample ids, instruction keys and texts), each written once and atomically at publish time."""

    def __init__(self, root: Path, model: str = "all-MiniLM-L6-v2") -> None:
        self.root = Path(root) / model
        self._cache: tuple[list[str], np.ndarray, np.ndarray, list[str]] | None = None

    def add(self, table: pa.Table, encode: MiniLM | None = None) -> int:
        """Record the live rows' instructions of a published table (those not recorded yet); the
        number of instructions added."""
        live = np.flatnonzero(~dropped_mask(table).to_numpy(zero_copy_only=False))
        prompts, best_ids, _ = task_groups(table, live)
        held = set(self._load()[1].tolist())  # an instruction published before is not added again
        fresh = [i for i, p in enumerate(prompts) if _key(p) not in held]
        prompts, best_ids = [prompts[i] for i in fresh], [best_ids[i] for i in fresh]
        if not prompts:
            return 0
        vectors = (encode or encoder()).encode(prompts).astype(np.float16)
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{uuid.uuid4().hex}.npz"
        temp = path.with_name(f".{path.name}.tmp.npz")
        np.savez(
            temp,
            vectors=vectors,
            ids=np.array(best_ids),
            keys=np.array([_key(p) for p in prompts]),
            prompts=np.array(prompts),
        )
        os.replace(temp, path)
        self._cache = None
        return len(prompts)

    def held(self) -> bool:
        """Whether any published instruction is recorded (without loading the files)."""
        return self.root.is_dir() and any(not f.name.startswith(".") for f in self.root.glob("*.npz"))

    def _load(self) -> tuple[list[str], np.ndarray, np.ndarray, list[str]]:
        if self._cache is None:
            files = sorted(self.root.glob("*.npz")) if self.root.is_dir() else []
            ids: list[str] = []
            prompts: list[str] = []
            keys, vectors = [], []
            for file in files:
                if file.name.startswith("."):
                    continue
                with np.load(file, allow_pickle=False) as data:
                    if "prompts" not in data.files:  # written before the pair check: cannot be checked
                        continue
                    ids.extend(data["ids"].tolist())
                    prompts.extend(data["prompts"].tolist())
                    keys.append(data["keys"])
                    vectors.append(data["vectors"].astype(np.float32))
            self._cache = (
                ids,
                np.concatenate(keys) if keys else np.zeros(0, dtype="<U40"),
                np.concatenate(vectors) if vectors else np.zeros((0, 384), np.float32),
                prompts,
            )
        return self._cache

    def query(
        self,
        vectors: np.ndarray,
        prompts: list[str],
        config: SemanticDedupConfig,
        encode: Callable[[list[str]], np.ndarray],
        candidates: int = 5,
    ) -> list[tuple[str, float] | None]:
        """For each instruction, the most similar published one at or above ``config.threshold`` that the
        pair check finds to be the same task (its sample id and similarity), an identical instruction
        excluded; else None. Up to ``candidates`` published neighbours are checked per instruction."""
        ids, published_keys, published, texts = self._load()
        found: list[tuple[str, float] | None] = [None] * len(vectors)
        if not len(published) or not len(vectors):
            return found
        keys = [_key(p) for p in prompts]
        proposals: list[tuple[int, int, float]] = []
        for start in range(0, len(vectors), 1024):
            block = vectors[start : start + 1024] @ published.T
            same = np.asarray(keys[start : start + 1024])[:, None] == published_keys[None, :]
            block[same] = -1.0
            top = np.argsort(-block, axis=1)[:, :candidates]
            for offset, columns in enumerate(top.tolist()):
                for column in columns:
                    score = float(block[offset, column])
                    if score >= config.threshold:
                        proposals.append((start + offset, column, round(score, 4)))
        verdicts = check_pairs(
            [(prompts[i], texts[c]) for i, c, _ in proposals],
            encode,
            config.min_alignment,
            config.min_substitution,
        )
        for (i, column, score), verdict in zip(proposals, verdicts, strict=True):
            best = found[i]
            if verdict.same and (best is None or score > best[1]):
                found[i] = (ids[column], score)
        return found


def semantic_dedup_samples(
    table: pa.Table,
    config: SemanticDedupConfig,
    published: PublishedPrompts | None = None,
    model: MiniLM | None = None,
) -> tuple[pa.Table, SemanticStats]:
    """Every row back; the rows of each merged instruction get ``drop``/``semantic_duplicate``, the
    kept instruction's best row ``keep``/``semantic_representative``; rows dropped upstream untouched."""
    started = time.perf_counter()
    stats = SemanticStats(rows_in=table.num_rows)
    live = np.flatnonzero(~dropped_mask(table).to_numpy(zero_copy_only=False))
    prompts, best_ids, groups = task_groups(table, live)
    stats.tasks = len(prompts)
    against = published is not None and config.published and published.held()
    if not config.enabled or not prompts or (len(prompts) < 2 and not against):
        return table, stats  # nothing to compare: the encoder is not even loaded
    model = model or encoder()
    vectors = model.encode(prompts)
    merged = merge_within(
        prompts,
        vectors,
        model.encode,
        threshold=config.threshold,
        min_alignment=config.min_alignment,
        min_substitution=config.min_substitution,
    )
    outside: dict[int, tuple[str, float]] = {}
    if published is not None and against:
        kept = [i for i in range(len(prompts)) if i not in merged]
        hits = published.query(vectors[kept], [prompts[i] for i in kept], config, model.encode)
        outside = {i: hit for i, hit in zip(kept, hits, strict=True) if hit is not None}
    rows, verdicts, reasons, details = [], [], [], []
    absorbed: dict[int, int] = {}
    for task, (into, score) in merged.items():
        # a member of a group whose keeper matched a published task goes with it
        target = outside.get(into)
        of = target[0] if target else best_ids[into]
        absorbed[into] = absorbed.get(into, 0) + 1
        for row in groups[task]:
            rows.append(row)
            verdicts.append("drop")
            reasons.append("semantic_duplicate")
            details.append(json.dumps({"of": of, "similarity": score}, sort_keys=True, separators=(",", ":")))
        stats.pairs.append({"dropped": prompts[task], "kept": prompts[into], "similarity": score})
    for task, (sample, score) in outside.items():
        for row in groups[task]:
            rows.append(row)
            verdicts.append("drop")
            reasons.append("semantic_duplicate")
            details.append(
                json.dumps(
                    {"of": sample, "published": True, "similarity": score},
                    sort_keys=True,
                    separators=(",", ":"),
                )
            )
    for into, count in absorbed.items():
        if into in outside:
            continue
        rows.append(groups[into][0])
        verdicts.append("keep")
        reasons.append("semantic_representative")
        details.append(json.dumps({"merged": count}, separators=(",", ":")))
    stats.merged = len(merged)
    stats.published_matches = len(outside)
    stats.dropped_rows = verdicts.count("drop")
    out = add_decision(table, STAGE, verdicts, reasons, details, rows=rows) if rows else table
    stats.seconds = time.perf_counter() - started
    return out, stats
