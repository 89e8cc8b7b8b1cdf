"""Dedup benchmark: ptfactory against datasketch, rensa and gaoya on one corpus, one run.

    python bench/dedup.py [--docs 20000] [--repeats 3] [--rss]

Every method gets the same raw texts (~250-word documents with near-duplicate families and
unrelated documents), threshold 0.8, 128 permutations, word 5-grams, and ends with clusters
(connected components of the pairs it reports). Printed per method: docs/s (median of
``--repeats``), the ratio to datasketch, and accuracy against exact Jaccard ground truth:
precision of the pairs a method asserts (each dropped row with its cluster's kept row; a pair
is right if its exact Jaccard >= 0.8) and recall of true pairs with Jaccard >= 0.85.
``--rss`` also runs ``ptf dedup`` on 100k and 1M generated rows and prints peak RSS of each.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.filters.dedup.core import DedupConfig, deduplicate
from ptfactory.filters.dedup.lsh import union_find
from tests.filters.corpus import Corpus, build

THRESHOLD, NUM_PERM, NGRAM = 0.8, 128, 5
_WORD = re.compile(r"\w+")


def _shingles(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    if len(words) < NGRAM:
        return [" ".join(words)]
    return [" ".join(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)]


def _components(n: int, pairs: list[tuple[int, int]]) -> np.ndarray:
    edges = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return union_find(n, edges)


def run_datasketch(texts: list[str]) -> np.ndarray:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    hashes = []
    for i, text in enumerate(texts):
        m = MinHash(num_perm=NUM_PERM)
        for shingle in _shingles(text):
            m.update(shingle.encode("utf-8"))
        lsh.insert(i, m)
        hashes.append(m)
    pairs = [(i, j) for i, m in enumerate(hashes) for j in lsh.query(m) if j != i]
    return _components(len(texts), pairs)


def run_rensa(texts: list[str]) -> np.ndarray:
    from rensa import RMinHash, RMinHashLSH

    lsh = RMinHashLSH(THRESHOLD, NUM_PERM, 16)
    hashes = []
    for i, text in enumerate(texts):
        m = RMinHash(num_perm=NUM_PERM, seed=42)
        m.update(_shingles(text))
        lsh.insert(i, m)
        hashes.append(m)
    pairs = [
        (i, j)
        for i, m in enumerate(hashes)
        for j in lsh.query(m)
        if j != i and m.jaccard(hashes[j]) >= THRESHOLD
    ]
    return _components(len(texts), pairs)


def run_gaoya(texts: list[str]) -> np.ndarray:
    from gaoya.minhash import MinHashStringIndex

    index = MinHashStringIndex(
        hash_size=32,
        jaccard_threshold=THRESHOLD,
        num_bands=16,
        band_size=8,
        analyzer="word",
        lowercase=True,
        ngram_range=(NGRAM, NGRAM),
    )
    ids = list(range(len(texts)))
    index.par_bulk_insert_docs(ids, texts)
    found = index.par_bulk_query(texts)
    pairs = [(i, j) for i, matches in enumerate(found) for j in matches if j != i]
    return _components(len(texts), pairs)


def run_ptfactory(texts: list[str]) -> np.ndarray:
    return deduplicate(texts, DedupConfig(threshold=THRESHOLD, num_perm=NUM_PERM, ngram=NGRAM)).cluster


def accuracy(clusters: np.ndarray, corpus: Corpus) -> tuple[float, float]:
    reps: dict[int, int] = {}
    for i, c in enumerate(clusters.tolist()):
        reps.setdefault(c, i)  # the first row of each cluster stands for it (ptfactory's own keeper)
    asserted = [(min(i, reps[c]), max(i, reps[c])) for i, c in enumerate(clusters.tolist()) if reps[c] != i]
    right = sum(1 for pair in asserted if corpus.truth.get(pair, 0.0) >= THRESHOLD)
    wanted = [pair for pair, j in corpus.truth.items() if j >= 0.85]
    found = sum(1 for a, b in wanted if clusters[a] == clusters[b])
    return (right / len(asserted) if asserted else 1.0), (found / len(wanted) if wanted else 1.0)


def timed(fn: Callable[[list[str]], np.ndarray], texts: list[str]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    clusters = fn(texts)
    return time.perf_counter() - start, clusters


def peak_rss_mb(rows: int, directory: Path) -> float:
    """Peak RSS of `ptf dedup` on ``rows`` generated ~80-word rows (its own process)."""
    source = directory / f"in-{rows}.parquet"
    subprocess.run([sys.executable, __file__, "--make-parquet", str(source), "--rows", str(rows)], check=True)
    repo, out = str(Path(__file__).resolve().parent.parent), str(directory / f"out-{rows}.parquet")
    code = (
        f"import resource, sys; from pathlib import Path; sys.path.insert(0, {repo!r})\n"
        "from ptfactory.filters.dedup import DedupConfig, dedup_parquet\n"
        f"dedup_parquet(Path({str(source)!r}), Path({out!r}), 'text', DedupConfig())\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def make_parquet(path: Path, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    vocab = np.array(
        ["".join(rng.choice(list("etaoinshrdlucmfwyp"), size=rng.integers(3, 9))) for _ in range(20_000)]
    )
    with pq.ParquetWriter(path, pa.schema([("text", pa.string())])) as writer:
        for start in range(0, rows, 50_000):
            n = min(50_000, rows - start)
            ids = rng.zipf(1.3, size=(n, 80)) % len(vocab)
            texts = [" ".join(row) for row in vocab[ids]]
            for i in range(0, n, 10):  # one row in ten repeats an earlier one with one word changed
                if i:
                    words = texts[i - 1].split(" ")
                    words[40] = "changed"
                    texts[i] = " ".join(words)
            writer.write_table(pa.table({"text": texts}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", default="datasketch,rensa,gaoya,ptfactory")
    parser.add_argument("--rss", action="store_true")
    parser.add_argument("--make-parquet", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make_parquet:
        make_parquet(args.make_parquet, args.rows)
        return
    families = args.docs // 10
    corpus = build(families=families, unrelated=args.docs - families * 4, seed=1)
    words = statistics.mean(len(t.split()) for t in corpus.texts[:2000])
    print(f"corpus: {len(corpus.texts)} docs, ~{words:.0f} words each, {os.cpu_count()} cores", flush=True)
    methods = {
        "datasketch": run_datasketch,
        "rensa": run_rensa,
        "gaoya": run_gaoya,
        "ptfactory": run_ptfactory,
    }
    rows = {}
    for name in args.methods.split(","):
        seconds, clusters = [], None
        for _ in range(args.repeats if name != "datasketch" else max(1, args.repeats)):
            s, clusters = timed(methods[name], corpus.texts)
            seconds.append(s)
            print(f"  {name}: {s:.2f}s", flush=True)
        assert clusters is not None
        precision, recall = accuracy(clusters, corpus)
        rows[name] = (len(corpus.texts) / statistics.median(seconds), precision, recall)
    base = rows.get("datasketch", (1.0, 0, 0))[0]
    print()
    print(f"threshold {THRESHOLD}, {NUM_PERM} perms, word {NGRAM}-grams; docs/s median of {args.repeats}")
    print("| method | docs/s | vs datasketch | precision | recall (J>=0.85) | F1 |")
    print("|---|---|---|---|---|---|")
    for name, (rate, p, r) in rows.items():
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        print(f"| {name} | {rate:,.0f} | {rate / base:.1f}x | {p:.3f} | {r:.3f} | {f1:.3f} |")
    if args.rss:
        with tempfile.TemporaryDirectory(prefix="ptf-bench-dedup-") as tmp:
            small, large = peak_rss_mb(100_000, Path(tmp)), peak_rss_mb(1_000_000, Path(tmp))
        print(
            f"peak RSS of `ptf dedup`: 100k rows {small:.0f} MB, 1M rows {large:.0f} MB "
            f"({large / small:.2f}x; goal <= 1.5x)"
        )


if __name__ == "__main__":
    main()
