"""A synthetic near-duplicate corpus with known ground truth.

Families of documents: a base text (~250 words in ~12 sentences, Zipf-distributed vocabulary)
and variants made by word substitutions, insertions, deletions, sentence shuffles and
case/whitespace/punctuation changes, at controlled strengths from near-identical to clearly
different; plus unrelated documents. Truth is the exact Jaccard of the word 5-gram sets under
the same normalization the dedup uses, computed for every pair that could be similar.
"""

from __future__ import annotations

import itertools
import random
import re
import unicodedata
from dataclasses import dataclass

_WORD = re.compile(r"\w+")


def _shingles(text: str, k: int = 5) -> set[tuple[str, ...]]:
    words = _WORD.findall(unicodedata.normalize("NFKC", text).lower())
    if len(words) < k:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


def jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb) if sa or sb else 1.0


@dataclass
class Corpus:
    texts: list[str]
    family: list[int]
    truth: dict[tuple[int, int], float]  # exact Jaccard of every within-family pair


def _vocabulary(rng: random.Random, size: int = 30_000) -> tuple[list[str], list[float]]:
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    words = sorted({"".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(size)})
    return words, [1 / (rank + 1) ** 0.8 for rank in range(len(words))]


def _base(rng: random.Random, vocab: list[str], weights: list[float]) -> list[list[str]]:
    sentences = []
    for _ in range(rng.randint(10, 14)):
        sentences.append(rng.choices(vocab, weights=weights, k=rng.randint(15, 28)))
    return sentences


def _render(sentences: list[list[str]]) -> str:
    return " ".join(" ".join(s).capitalize() + "." for s in sentences)


def _edit(rng: random.Random, sentences: list[list[str]], vocab: list[str], op: str, strength: int) -> str:
    s = [list(x) for x in sentences]
    flat_positions = [(i, j) for i, sent in enumerate(s) for j in range(len(sent))]
    if op == "substitute":
        for i, j in rng.sample(flat_positions, strength):
            s[i][j] = rng.choice(vocab)
    elif op == "insert":
        for _ in range(strength):
            i = rng.randrange(len(s))
            s[i].insert(rng.randrange(len(s[i]) + 1), rng.choice(vocab))
    elif op == "delete":
        for i, j in sorted(rng.sample(flat_positions, strength), reverse=True):
            if len(s[i]) > 1:
                del s[i][j]
    elif op == "shuffle":
        for _ in range(strength):
            a, b = rng.randrange(len(s)), rng.randrange(len(s))
            s[a], s[b] = s[b], s[a]
    text = _render(s)
    if op == "case":
        text = "  ".join(w.upper() if rng.random() < 0.3 else w for w in text.split(" "))
        text = text.replace(".", " !") if strength % 2 else text
    return text


def build(families: int = 300, unrelated: int = 600, seed: int = 0) -> Corpus:
    rng = random.Random(seed)
    vocab, weights = _vocabulary(rng)
    texts: list[str] = []
    family: list[int] = []
    plans = [
        ("case", 1),
        ("case", 2),
        ("shuffle", 2),
        ("substitute", 1),
        ("substitute", 2),
        ("substitute", 3),
        ("insert", 2),
        ("delete", 2),
        ("substitute", 5),
        ("substitute", 8),
        ("substitute", 14),
        ("insert", 10),
        ("delete", 12),
        ("shuffle", 8),
    ]
    for f in range(families):
        base = _base(rng, vocab, weights)
        texts.append(_render(base))
        family.append(f)
        for op, strength in rng.sample(plans, rng.randint(2, 5)):
            texts.append(_edit(rng, base, vocab, op, strength))
            family.append(f)
    for u in range(unrelated):
        texts.append(_render(_base(rng, vocab, weights)))
        family.append(families + u)
    truth: dict[tuple[int, int], float] = {}
    members: dict[int, list[int]] = {}
    for index, fam in enumerate(family):
        members.setdefault(fam, []).append(index)
    for group in members.values():
        for a, b in itertools.combinations(group, 2):
            truth[(a, b)] = jaccard(texts[a], texts[b])
    return Corpus(texts, family, truth)


def pair_scores(
    clusters: list[int], corpus: Corpus, threshold: float = 0.8, recall_floor: float = 0.85
) -> dict[str, float]:
    """Pair precision (a predicted pair is right if its exact Jaccard >= threshold), recall over
    pairs with Jaccard >= recall_floor, and F1 of the two."""
    by_cluster: dict[int, list[int]] = {}
    for index, cluster in enumerate(clusters):
        by_cluster.setdefault(cluster, []).append(index)
    predicted = {pair for group in by_cluster.values() for pair in itertools.combinations(sorted(group), 2)}
    correct = sum(1 for pair in predicted if corpus.truth.get(pair, 0.0) >= threshold)
    wanted = {pair for pair, j in corpus.truth.items() if j >= recall_floor}
    precision = correct / len(predicted) if predicted else 1.0
    recall = len(wanted & predicted) / len(wanted) if wanted else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "predicted_pairs": len(predicted),
        "true_pairs": len(wanted),
    }
