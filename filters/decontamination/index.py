"""The n-gram index: each hashed benchmark n-gram mapped to the items it occurs in.

Arrays, not sets: ``hashes`` (uint64, sorted) with ``owners`` (uint32, the item each entry comes
from; an n-gram several items share has one entry per item), and the same pair for whole short
items (fewer than n words, matched on their whole normalised text). ``item_ids`` and
``item_bench`` name each item and its benchmark, so a hit names *which* item collided.

Long items (more than ``long_words`` words, e.g. WritingBench queries that carry a whole
reference document) keep one n-gram in ``sample_every``, chosen by the hash itself, so the row
side finds exactly the kept ones with no extra work: a row sharing k n-grams with such an item is
found with probability ``1 - (1 - 1/sample_every)**k`` (k = 40, a shared 52-word passage: 99.5%
at 8). Every n-gram of every other item is kept. This keeps the shipped index a few MB instead of
~25 (WritingBench's Chinese queries alone have ~2.5 M character 13-grams).

The content hash (sha256 of the arrays and the metadata) names an index; a file whose bytes do
not give its recorded hash is refused.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ptfactory.errors import ConfigError
from ptfactory.filters.decontamination.normalize import SCHEME, Grams
from ptfactory.filters.decontamination.sources import Item

__all__ = ["NgramIndex"]

_ARRAYS = ("hashes", "owners", "short_hashes", "short_owners", "item_bench")
_BUCKET_BITS = 22  # 4 M buckets: ~0.14 entries each for the shipped index's 576 k n-grams
_SHIFT = np.uint64(64 - _BUCKET_BITS)


class NgramIndex:
    """Hashed benchmark n-grams → items. Build with :meth:`build`, combine with :meth:`merge`."""

    def __init__(self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
        self.hashes = np.asarray(arrays["hashes"], dtype=np.uint64)
        self.owners = np.asarray(arrays["owners"], dtype=np.uint32)
        self.short_hashes = np.asarray(arrays["short_hashes"], dtype=np.uint64)
        self.short_owners = np.asarray(arrays["short_owners"], dtype=np.uint32)
        self.item_bench = np.asarray(arrays["item_bench"], dtype=np.uint16)
        self.meta = dict(meta)
        self.n: int = int(meta["n"])
        self.item_ids: list[str] = list(meta["item_ids"])
        self.benchmarks: list[dict[str, Any]] = [dict(b) for b in meta["benchmarks"]]
        self.short_lengths = np.unique(self._short_length_of_owner()) if len(self.short_owners) else []
        self.content_hash = self._digest()
        self._buckets: np.ndarray | None = None

    # ---- building -------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        items: Iterable[Item],
        n: int,
        benchmarks: list[dict[str, Any]],
        *,
        sample_every: int = 8,
        long_words: int = 300,
    ) -> NgramIndex:
        """Index ``items`` (every text of an item, joined in order). ``benchmarks`` lists each
        benchmark's name and facts (source, licence); item counts are filled in here."""
        listed = list(items)
        names = [b["name"] for b in benchmarks]
        position = {name: i for i, name in enumerate(names)}
        missing = sorted({it.benchmark for it in listed} - set(position))
        if missing:
            raise ConfigError(f"items of benchmarks {missing} were given without their description")
        grams = Grams(["\n".join(it.texts) for it in listed])
        doc, _, hashes = grams.of_length(n)
        long_doc = grams.lengths[doc] > long_words
        keep = ~long_doc | (hashes % np.uint64(sample_every) == 0)
        doc, hashes = doc[keep], hashes[keep]
        short_doc, short_hash = grams.whole_texts()
        short = (grams.lengths[short_doc] < n) & (grams.lengths[short_doc] > 0)
        counts = {name: 0 for name in names}
        for it in listed:
            counts[it.benchmark] += 1
        described = [{**b, "items": counts[b["name"]]} for b in benchmarks]
        arrays = {
            "hashes": hashes,
            "owners": doc.astype(np.uint32),
            "short_hashes": short_hash[short],
            "short_owners": short_doc[short].astype(np.uint32),
            "item_bench": np.array([position[it.benchmark] for it in listed], dtype=np.uint16),
        }
        meta = {
            "scheme": SCHEME,
            "n": n,
            "sample_every": sample_every,
            "long_words": long_words,
            "item_ids": [it.item_id for it in listed],
            "item_words": grams.lengths.tolist(),
            "benchmarks": described,
        }
        return cls(_sorted(arrays), meta)

    def select(self, names: Iterable[str]) -> NgramIndex:
        """The part of this index that belongs to the benchmarks ``names`` (in this index's order)."""
        wanted = [i for i, b in enumerate(self.benchmarks) if b["name"] in set(names)]
        keep_item = np.isin(self.item_bench, np.array(wanted, dtype=np.uint16))
        new_id = np.cumsum(keep_item) - 1
        remap = np.full(len(self.benchmarks), -1, dtype=np.int64)
        remap[wanted] = np.arange(len(wanted))
        arrays = {
            "hashes": self.hashes[keep_item[self.owners]],
            "owners": new_id[self.owners[keep_item[self.owners]]].astype(np.uint32),
            "short_hashes": self.short_hashes[keep_item[self.short_owners]],
            "short_owners": new_id[self.short_owners[keep_item[self.short_owners]]].astype(np.uint32),
            "item_bench": remap[self.item_bench[keep_item]].astype(np.uint16),
        }
        words = self.meta.get("item_words", [0] * len(self.item_ids))
        meta = {
            **self.meta,
            "item_ids": [i for i, k in zip(self.item_ids, keep_item, strict=True) if k],
            "item_words": [w for w, k in zip(words, keep_item, strict=True) if k],
            "benchmarks": [self.benchmarks[i] for i in wanted],
        }
        return NgramIndex(arrays, meta)

    def merge(self, other: NgramIndex) -> NgramIndex:
        """One index holding both (same n and scheme); ``other``'s benchmarks come after ours."""
        if (other.n, other.meta["scheme"]) != (self.n, self.meta["scheme"]):
            raise ConfigError(
                f"cannot merge indexes built with n={other.n} ({other.meta['scheme']}) and "
                f"n={self.n} ({self.meta['scheme']})"
            )
        clash = {b["name"] for b in self.benchmarks} & {b["name"] for b in other.benchmarks}
        if clash:
            raise ConfigError(f"benchmark names {sorted(clash)} are used twice; give each a distinct name")
        shift = np.uint32(len(self.item_ids))
        arrays = {
            "hashes": np.concatenate([self.hashes, other.hashes]),
            "owners": np.concatenate([self.owners, other.owners + shift]),
            "short_hashes": np.concatenate([self.short_hashes, other.short_hashes]),
            "short_owners": np.concatenate([self.short_owners, other.short_owners + shift]),
            "item_bench": np.concatenate(
                [self.item_bench, other.item_bench + np.uint16(len(self.benchmarks))]
            ),
        }
        meta = {
            **self.meta,
            "item_ids": self.item_ids + other.item_ids,
            "item_words": list(self.meta.get("item_words", [])) + list(other.meta.get("item_words", [])),
            "benchmarks": self.benchmarks + other.benchmarks,
        }
        return NgramIndex(_sorted(arrays), meta)

    # ---- facts ------------------------------------------------------------------------------

    @property
    def counts(self) -> dict[str, int]:
        """Items per benchmark."""
        return {b["name"]: int(b["items"]) for b in self.benchmarks}

    def empty_benchmarks(self) -> list[str]:
        """Configured benchmarks that loaded no item (the stage's check fails on any)."""
        return [name for name, count in self.counts.items() if count == 0]

    def summary(self) -> dict[str, Any]:
        """What a manifest or asset metadata records: the hash, n, scheme and each benchmark's count."""
        return {
            "index_hash": self.content_hash,
            "ngram": self.n,
            "scheme": self.meta["scheme"],
            "benchmarks": self.counts,
            "entries": int(len(self.hashes) + len(self.short_hashes)),
        }

    def benchmark_of(self, item: int) -> str:
        return str(self.benchmarks[int(self.item_bench[item])]["name"])

    # ---- lookup -----------------------------------------------------------------------------

    def lookup(self, hashes: np.ndarray, *, short: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(query position, item) for every item each query hash belongs to.

        The n-gram table is bucketed by the hashes' top :data:`_BUCKET_BITS` bits (a start offset per
        bucket, 16 MB, built on first use): a query reads its bucket's bounds, an empty bucket (~96% of
        the misses) ends it, and the few entries of a full one are compared in place; no binary
        search, and numpy does every step for the whole batch at once."""
        table, owners = (self.short_hashes, self.short_owners) if short else (self.hashes, self.owners)
        hashes = np.asarray(hashes, dtype=np.uint64)
        if short or not len(hashes):  # a handful of short items: sorted search is enough
            maybe = np.flatnonzero(np.isin(hashes, table))
            left = np.searchsorted(table, hashes[maybe], side="left")
            spans = np.searchsorted(table, hashes[maybe], side="right") - left
            query = np.repeat(maybe, spans)
            offsets = np.arange(int(spans.sum()), dtype=np.int64) - np.repeat(np.cumsum(spans) - spans, spans)
            return query, owners[np.repeat(left, spans) + offsets].astype(np.int64)
        if self._buckets is None:
            counts = np.bincount((self.hashes >> _SHIFT).astype(np.int64), minlength=1 << _BUCKET_BITS)
            self._buckets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
        bucket = (hashes >> _SHIFT).astype(np.int64)
        first, last = self._buckets[bucket], self._buckets[bucket + 1]
        query = np.flatnonzero(last > first)
        first, size = first[query].astype(np.int64), (last - first)[query]
        wanted = hashes[query]
        found_query, found_at = [], []
        for step in range(int(size.max()) if len(size) else 0):  # a bucket holds a few entries at most
            live = np.flatnonzero(size > step)
            at = first[live] + step
            equal = table[at] == wanted[live]
            found_query.append(query[live[equal]])
            found_at.append(at[equal])
        if not found_query:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(found_query), owners[np.concatenate(found_at)].astype(np.int64)

    # ---- files --------------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Written whole or not at all (a temp file renamed into place)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        meta = {**self.meta, "content_hash": self.content_hash}
        packed = {k: _pack(getattr(self, k), delta=k.endswith("hashes")) for k in _ARRAYS}
        np.savez_compressed(buffer, meta=np.array(json.dumps(meta, sort_keys=True)), **packed)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with temp.open("wb") as handle:
            handle.write(buffer.getvalue())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)

    @classmethod
    def load(cls, path: Path) -> NgramIndex:
        """Read an index file; a file whose content does not give its recorded hash is refused."""
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                arrays = {k: _unpack(data[k], delta=k.endswith("hashes")) for k in _ARRAYS}
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(
                f"decontamination index {path} cannot be read ({exc}); delete it to rebuild"
            ) from None
        if meta.get("scheme") != SCHEME:
            raise ConfigError(
                f"decontamination index {path} uses scheme {meta.get('scheme')!r}, not {SCHEME!r}; rebuild it"
            )
        recorded = meta.pop("content_hash", None)
        index = cls(arrays, meta)
        if recorded != index.content_hash:
            raise ConfigError(
                f"decontamination index {path} is corrupt (content hash {index.content_hash[:12]}, "
                f"recorded {str(recorded)[:12]}); delete it to rebuild"
            )
        return index

    # ---- internals ------------------------------------------------------------------------------

    def short_item_words(self) -> np.ndarray:
        """The word count of the item each short entry belongs to (its run length)."""
        return self._short_length_of_owner()

    def _short_length_of_owner(self) -> np.ndarray:
        words = np.asarray(self.meta.get("item_words", []), dtype=np.int64)
        return words[self.short_owners] if len(words) else np.zeros(0, np.int64)

    def _digest(self) -> str:
        digest = hashlib.sha256()
        for name in _ARRAYS:
            digest.update(np.ascontiguousarray(getattr(self, name)).tobytes())
        digest.update(
            json.dumps({k: v for k, v in self.meta.items() if k != "content_hash"}, sort_keys=True).encode()
        )
        return digest.hexdigest()


def _pack(values: np.ndarray, *, delta: bool) -> np.ndarray:
    """Stored as byte planes (all first bytes, then all second bytes ...), sorted hashes as their
    gaps: deflate then finds the zero high bytes, 5.4 MB -> 4.2 MB for the shipped index."""
    values = np.asarray(values)
    if delta:
        values = np.diff(values, prepend=np.uint64(0)).astype(np.uint64)
    elif values.dtype == np.uint32 and (not len(values) or int(values.max()) < 1 << 16):
        values = values.astype(np.uint16)
    return np.ascontiguousarray(values.view(np.uint8).reshape(-1, values.dtype.itemsize).T)


def _unpack(planes: np.ndarray, *, delta: bool) -> np.ndarray:
    width = planes.shape[0]
    values = np.ascontiguousarray(planes.T).view(f"<u{width}").reshape(-1)
    return (
        np.cumsum(values, dtype=np.uint64) if delta else values.astype(np.uint64 if width == 8 else np.uint32)
    )


def _sorted(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Entries sorted by (hash, owner), duplicates (same hash, same item) removed."""
    out = dict(arrays)
    for hashes, owners in (("hashes", "owners"), ("short_hashes", "short_owners")):
        h = np.asarray(arrays[hashes], dtype=np.uint64)
        o = np.asarray(arrays[owners], dtype=np.uint32)
        order = np.lexsort((o, h))
        h, o = h[order], o[order]
        if len(h):
            fresh = np.ones(len(h), dtype=bool)
            fresh[1:] = (h[1:] != h[:-1]) | (o[1:] != o[:-1])
            h, o = h[fresh], o[fresh]
        out[hashes], out[owners] = h, o
    return out
