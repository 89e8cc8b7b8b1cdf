"""Decontamination bench: does the n-gram check find planted benchmark items, spare clean rows, and
what does it cost per row against a plain Python n-gram set on the same rows.

    python bench/decontamination.py [--items 300] [--clean 3000] [--repeats 3]

Planted rows: ``--items`` benchmark items drawn evenly from every built-in benchmark (read from the
source packages the tests install), each as a user turn holding the item's first text (question,
prompt, query) and an assistant turn holding its second (answer, solution) when it has one, in three
variants: verbatim; one sentence replaced by a new one; reformatted (whitespace collapsed, spaces
before punctuation, quotes changed, a markdown bullet). Clean rows: the demo's seeds (written for
ptfactory; the one deliberate GSM8K quote left out), the 474 phrasings of bench/data/
paraphrase_tasks.json, and Faker paragraphs (seeded), ``--clean`` rows in all. A row is flagged when
the check names any item; recall is per variant, precision over all flags (a planted row flagged with
another item of the same benchmark counts as right: GSM8K and AgentBench repeat their frames).

Speed: rows/s of the check (index already loaded) over the same rows, ptfactory's vectorised check
against a plain Python baseline (regex words, a dict from 13-word tuples to items, one lookup per
n-gram), median of ``--repeats``; the baseline's index build is timed apart. datatrove's n-gram
decontamination is not run: its indexer takes lighteval task names and loads their data from the
Hugging Face hub, which cannot be reached here. The machine is a shared 2-core box.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.filters.decontamination import NgramIndex, check_texts
from ptfactory.filters.decontamination.cache import SHIPPED
from ptfactory.filters.decontamination.sources import BUILTINS, Item, builtin_items

ROOT = Path(__file__).resolve().parent.parent
_SENTENCE = re.compile(r"(?<=[.?!。？！])\s*")


def _row_text(item: Item) -> str:
    return "\n".join(item.texts[:2])


def _one_sentence_changed(text: str, rng: random.Random) -> str:
    parts = _SENTENCE.split(text)
    where = rng.randrange(len(parts))
    parts[where] = "Meanwhile the weather turned cold and everyone went home early."
    return " ".join(parts)


def _reformatted(text: str) -> str:
    text = " ".join(text.split())
    text = re.sub(r"([,.;:?!])", r" \1", text).replace("'", "’").replace('"', "“")
    return "* " + text


def planted(count: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """(variant, benchmark, text) rows."""
    per = max(1, count // len(BUILTINS))
    rows = []
    for name in BUILTINS:
        items = builtin_items(name)
        for item in rng.sample(items, min(per, len(items))):
            text = _row_text(item)
            rows += [
                ("verbatim", name, text),
                ("sentence_changed", name, _one_sentence_changed(text, rng)),
                ("reformatted", name, _reformatted(text)),
            ]
    return rows


def clean(count: int) -> list[str]:
    from faker import Faker

    seeds = [
        "\n".join(str(v) for k, v in json.loads(line).items() if k != "id")
        for f in sorted((ROOT / "demo" / "seeds").glob("*.jsonl"))
        if f.name != "benchmark_quote.jsonl"
        for line in f.read_text().splitlines()
        if line
    ]
    groups = json.loads((ROOT / "bench" / "data" / "paraphrase_tasks.json").read_text())["groups"]
    rows = seeds + [p for g in groups for t in g["tasks"] for p in t["phrasings"]]
    fake = Faker("en_US")
    fake.seed_instance(38)
    while len(rows) < count:
        rows.append(fake.paragraph(nb_sentences=6))
    return rows[:count]


# ---- the plain Python baseline -------------------------------------------------------------------


def _words(text: str) -> list[str]:
    text = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    return re.findall(r"[^\W_]+", text)


def baseline_index(n: int) -> dict[tuple[str, ...], str]:
    index: dict[tuple[str, ...], str] = {}
    for name in BUILTINS:
        for item in builtin_items(name):
            words = _words("\n".join(item.texts))
            for i in range(len(words) - n + 1):
                index.setdefault(tuple(words[i : i + n]), item.item_id)
    return index


def baseline_check(texts: list[str], index: dict[tuple[str, ...], str], n: int) -> list[str | None]:
    out: list[str | None] = []
    for text in texts:
        words = _words(text)
        out.append(
            next(
                (index[g] for i in range(len(words) - n + 1) if (g := tuple(words[i : i + n])) in index), None
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--clean", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(38)
    index = NgramIndex.load(SHIPPED)
    rows = planted(args.items, rng)
    negatives = clean(args.clean)
    texts = [t for _, _, t in rows] + negatives
    hits = check_texts(texts, index)

    print(
        f"index {index.content_hash[:12]} n={index.n}: {index.summary()['entries']:,} entries; "
        f"{len(rows)} planted rows, {len(negatives)} clean rows"
    )
    print(f"{'variant':18} {'recall':>7}  per benchmark")
    flagged_right = 0
    for variant in ("verbatim", "sentence_changed", "reformatted"):
        found: dict[str, list[int]] = {}
        for (v, name, _), hit in zip(rows, hits, strict=False):
            if v == variant:
                ok = hit is not None and hit.benchmark == name
                found.setdefault(name, []).append(ok)
                flagged_right += ok
        total = sum(len(x) for x in found.values())
        per = ", ".join(f"{k} {sum(x)}/{len(x)}" for k, x in found.items())
        print(f"{variant:18} {sum(sum(x) for x in found.values()) / total:7.3f}  {per}")
    false_flags = [t for t, h in zip(negatives, hits[len(rows) :], strict=True) if h]
    flagged = sum(h is not None for h in hits)
    print(
        f"precision {flagged_right / max(flagged, 1):.3f} ({flagged} flagged); clean rows flagged: "
        f"{len(false_flags)}/{len(negatives)}"
    )
    for text in false_flags[:3]:
        print("  false flag:", text[:100].replace("\n", " "))

    started = time.perf_counter()
    base_index = baseline_index(index.n)
    built = time.perf_counter() - started
    long_rows = ["\n".join(texts[i : i + 8]) for i in range(0, len(texts), 8)]
    print(
        f"\ncheck speed (median of {args.repeats}); the baseline's index took {built:.1f} s to build in "
        f"memory ({len(base_index):,} n-grams, from the benchmarks' text), ptfactory's loads in ~0.2 s"
    )
    for label, batch in (
        (f"{len(texts)} rows as planted (~60 words)", texts),
        (f"{len(long_rows)} rows of 8 joined (~500 words)", long_rows),
    ):
        timings: dict[str, list[float]] = {"ptfactory (polars + numpy)": [], "plain Python n-gram set": []}
        for _ in range(args.repeats):
            started = time.perf_counter()
            check_texts(batch, index)
            timings["ptfactory (polars + numpy)"].append(time.perf_counter() - started)
            started = time.perf_counter()
            baseline_check(batch, base_index, index.n)
            timings["plain Python n-gram set"].append(time.perf_counter() - started)
        base = statistics.median(timings["plain Python n-gram set"])
        print(label)
        for name, values in timings.items():
            t = statistics.median(values)
            print(f"  {name:32} {len(batch) / t:10,.0f} rows/s  {base / t:6.2f}x")


if __name__ == "__main__":
    main()
