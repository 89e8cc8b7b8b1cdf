"""Checking texts and sample records against the index: which item each text collides with.

A text collides with an item when they share one indexed n-gram, or when the item is shorter than
n words and its whole normalised text occurs in the text as a run of words. Of the items a text
collides with, the one it shares most n-grams with is named (ties: the first indexed), with one
shared n-gram as evidence, in normalised words; for an item the index keeps only hashes of
(GPQA), the evidence is the row's own words, never the item's text.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ptfactory.filters.decontamination.index import NgramIndex
from ptfactory.filters.decontamination.normalize import Grams, _mix, unmix
from ptfactory.storage.schema import add_decision, dropped_mask
from ptfactory.storage.schema.text import turn_text

__all__ = ["STAGE", "DecontaminationStats", "Hit", "check_texts", "decontaminate_samples", "sample_texts"]

STAGE = "decontaminate"
REASON = "contaminated"


@dataclass(frozen=True)
class Hit:
    benchmark: str
    item: str
    ngram: str
    shared: int  # n-grams (or whole short items) this text shares with that item

    def detail(self) -> str:
        """Canonical JSON for ``decisions.detail`` (benchmark and item first: ``ptf lineage`` shows
        the first 60 characters)."""
        return json.dumps(
            {"benchmark": self.benchmark, "item": self.item, "ngram": self.ngram, "shared": self.shared},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )


@dataclass
class DecontaminationStats:
    rows_in: int = 0
    checked: int = 0
    contaminated: int = 0
    by_benchmark: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    index: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        return self.checked / self.seconds if self.seconds else 0.0

    def as_metadata(self) -> dict[str, Any]:
        return {
            "rows_in": self.rows_in,
            "checked": self.checked,
            "contaminated": self.contaminated,
            "by_benchmark": dict(self.by_benchmark),
            "seconds": round(self.seconds, 3),
            **self.index,
        }


def check_texts(texts: Sequence[str | None] | pa.Array, index: NgramIndex) -> list[Hit | None]:
    """For each text, the benchmark item it collides with, or None."""
    grams = Grams(texts)
    shorts = [int(length) for length in index.short_lengths]
    folds = grams.folds([index.n, *shorts])
    docs, items, starts, lengths = [], [], [], []
    if index.n in folds:
        positions = np.flatnonzero(grams.inside(np.arange(len(folds[index.n]), dtype=np.int64), index.n))
        query, item = index.lookup(_mix(folds[index.n][positions]))
        docs.append(grams.doc[positions[query]])
        items.append(item)
        starts.append(positions[query])
        lengths.append(np.full(len(query), index.n))
    for k in shorts:  # a few short items: their raw folds are compared, no batch-wide mixing
        if k not in folds:
            continue
        own = np.flatnonzero(index.short_item_words() == k)
        targets = unmix(index.short_hashes[own]) ^ (np.uint64(k) << np.uint64(56))
        at = np.flatnonzero(np.isin(folds[k], targets))
        at = at[grams.inside(at, k)]
        order = np.argsort(targets, kind="stable")
        left = np.searchsorted(targets[order], folds[k][at], side="left")
        spans = np.searchsorted(targets[order], folds[k][at], side="right") - left
        where = np.repeat(left, spans) + (
            np.arange(int(spans.sum()), dtype=np.int64) - np.repeat(np.cumsum(spans) - spans, spans)
        )
        hit = np.repeat(at, spans)
        docs.append(grams.doc[hit])
        items.append(index.short_owners[own[order[where]]].astype(np.int64))
        starts.append(hit)
        lengths.append(np.full(len(hit), k))
    if not docs:
        return [None] * len(grams.lengths)
    all_doc = np.concatenate(docs)
    all_item = np.concatenate(items)
    all_start = np.concatenate(starts)
    all_len = np.concatenate(lengths)
    hits: list[Hit | None] = [None] * len(grams.lengths)
    if not len(all_doc):
        return hits
    # per (text, item): how many shared grams, and the first one
    pair = all_doc * np.int64(len(index.item_ids) + 1) + all_item
    order = np.lexsort((all_start, pair))
    pair, first = np.unique(pair[order], return_index=True)
    counts = np.diff(np.append(first, len(order)))
    pair_doc = pair // np.int64(len(index.item_ids) + 1)
    pair_item = pair % np.int64(len(index.item_ids) + 1)
    best = np.lexsort((pair_item, -counts, pair_doc))  # per text: most shared, then first indexed
    seen: set[int] = set()
    for p in best.tolist():
        d = int(pair_doc[p])
        if d in seen:
            continue
        seen.add(d)
        g = order[first[p]]
        it = int(pair_item[p])
        hits[d] = Hit(
            index.benchmark_of(it),
            index.item_ids[it],
            grams.text_of(int(all_start[g]), int(all_len[g])),
            int(counts[p]),
        )
    return hits


def _messages_text(messages: Any) -> list[str]:
    return [turn_text(m) for m in messages or []]


def sample_texts(table: pa.Table) -> list[str]:
    """Every text field of each sample record, joined: messages (tool calls included), chosen,
    rejected, tests, and each agent step's arguments and output."""
    columns = [c for c in ("messages", "chosen", "rejected", "tests", "steps") if c in table.column_names]
    data = {c: table.column(c).to_pylist() for c in columns}
    texts = []
    for i in range(table.num_rows):
        parts: list[str] = []
        for name in ("messages", "chosen", "rejected"):
            if name in data:
                parts.extend(_messages_text(data[name][i]))
        if "tests" in data and data["tests"][i]:
            parts.append(data["tests"][i])
        for step in (data["steps"][i] or []) if "steps" in data else []:
            parts.extend(str(step[k]) for k in ("arguments", "output_tail") if step.get(k))
        texts.append("\n".join(parts))
    return texts


def decontaminate_samples(table: pa.Table, index: NgramIndex) -> tuple[pa.Table, DecontaminationStats]:
    """Every row back; each live row gets a ``decontaminate`` decision: ``drop``/``contaminated``
    with the evidence as canonical JSON in ``detail``, or ``keep``/``clean``. Rows dropped
    upstream pass through untouched."""
    started = time.perf_counter()
    stats = DecontaminationStats(rows_in=table.num_rows, index=index.summary())
    live = np.flatnonzero(~dropped_mask(table).to_numpy(zero_copy_only=False))
    subset = table.take(pa.array(live, pa.int64()))
    hits = check_texts(sample_texts(subset), index)
    verdicts = ["drop" if h else "keep" for h in hits]
    reasons = [REASON if h else "clean" for h in hits]
    details = [h.detail() if h else None for h in hits]
    out = add_decision(table, STAGE, verdicts, reasons, details, rows=live.tolist())
    stats.checked = len(live)
    stats.contaminated = sum(1 for h in hits if h)
    stats.by_benchmark.update(h.benchmark for h in hits if h)
    stats.seconds = time.perf_counter() - started
    return out, stats
