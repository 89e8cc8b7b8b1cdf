"""LSH band keys kept per published shard, so a leak check can cost what changed.

``no_split_leak`` asks whether any held-out (validation) row is a near duplicate of a row on
another side. For a version made by changing a few rows of a checked parent, the only pairs that
can be new involve a changed row, so the check hashes the changed rows and looks them up in the
band keys of every shard on the other side — keys computed once per shard content and kept in a
small file named by the shard's sha256 (the same bytes always have the same keys, and a reused
shard is the parent's bytes). A rewritten shard's keys are its base shard's, less the rows that
left, plus the changed rows'. Candidates (rows sharing a band key) are verified on the exact
Jaccard of their shingle sets, reading only the candidate rows' texts.

Keys are the low 32 bits of each band's hash (half the bytes; a chance collision only adds a
candidate, which verification drops). Files are Arrow IPC, memory-mapped when read.
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.filters.dedup.core import DedupConfig, compute_signatures
from ptfactory.filters.dedup.leaks import Leak, audit_texts
from ptfactory.filters.dedup.lsh import band_keys, candidate_pairs
from ptfactory.filters.dedup.minhash import EMPTY, SHINGLE_HASH
from ptfactory.storage.schema import SAMPLE_SCHEMA
from ptfactory.storage.shards import ShardInfo, bucket_files

__all__ = ["TEXT_COLUMNS", "KeyCache", "Keys", "Side", "crossing_leaks", "probe_leaks", "version_sides"]

_Array = np.ndarray[Any, np.dtype[Any]]
# what a row's audit text is made of (``leaks.audit_texts``: the conversation, and a preference
# row's chosen answer)
TEXT_COLUMNS = ["sample_id", "messages", "chosen"]
# a shard's rows: (columns) -> table
Reader = Callable[[list[str]], pa.Table]


@dataclass(frozen=True)
class Keys:
    """Band keys of the rows that have shingles (the others can match nothing), with their ids."""

    ids: pa.Array  # string
    keys: _Array  # uint32[n, bands]

    @classmethod
    def empty(cls, bands: int) -> Keys:
        return cls(pa.array([], pa.string()), np.zeros((0, bands), np.uint32))

    @classmethod
    def compute(cls, table: pa.Table, config: DedupConfig) -> Keys:
        bands, rows = config.bands
        if not table.num_rows:
            return cls.empty(bands)
        hashed = compute_signatures(audit_texts(table), config)
        usable = (hashed.signatures != EMPTY).any(axis=1)
        keys = band_keys(hashed.signatures[usable], bands, rows).astype(np.uint32)  # the low 32 bits
        ids = table.column("sample_id").combine_chunks().filter(pa.array(usable))
        return cls(ids.cast(pa.string()), keys)

    @classmethod
    def concat(cls, parts: Sequence[Keys], bands: int) -> Keys:
        if not parts:
            return cls.empty(bands)
        return cls(pa.concat_arrays([p.ids for p in parts]), np.concatenate([p.keys for p in parts]))

    def _mask(self, ids: pa.Array | pa.ChunkedArray) -> _Array:
        found = pc.is_in(self.ids, value_set=pa.chunked_array([ids]).combine_chunks().cast(pa.string()))
        return np.asarray(found.to_numpy(zero_copy_only=False), dtype=bool)

    def without(self, ids: pa.Array | pa.ChunkedArray) -> Keys:
        if not len(ids) or not len(self.ids):
            return self
        keep = ~self._mask(ids)
        return Keys(self.ids.filter(pa.array(keep)), self.keys[keep])

    def within(self, ids: pa.Array | pa.ChunkedArray) -> Keys:
        keep = self._mask(ids) if len(self.ids) else np.zeros(0, bool)
        return Keys(self.ids.filter(pa.array(keep)), self.keys[keep])


class KeyCache:
    """``<root>/<settings>/<shard sha256>.arrow``: a shard's keys, written once, never changed."""

    def __init__(self, root: Path, config: DedupConfig) -> None:
        settings = (SHINGLE_HASH, config.num_perm, config.ngram, config.seed, config.bands)
        self.folder = root / hashlib.blake2b(repr(settings).encode(), digest_size=8).hexdigest()
        self.config = config

    def path(self, sha256: str) -> Path:
        return self.folder / f"{sha256}.arrow"

    def get(self, sha256: str) -> Keys | None:
        path = self.path(sha256)
        if not path.exists():
            return None
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_file(source).read_all()
        bands = self.config.bands[0]
        keys = np.stack([table.column(f"k{b}").to_numpy() for b in range(bands)], axis=1)
        return Keys(table.column("sample_id").combine_chunks(), keys)

    def put(self, sha256: str, keys: Keys) -> None:
        table = pa.table(
            {"sample_id": keys.ids, **{f"k{b}": pa.array(keys.keys[:, b]) for b in range(keys.keys.shape[1])}}
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(sha256)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
                out.write_table(table)
            os.replace(tmp, path)  # a cache: atomic, not fsynced (a lost file is computed again)
        finally:
            tmp.unlink(missing_ok=True)

    def keys_of(
        self, sha256: str, read: Reader, base: Keys | None = None, changed: pa.Table | None = None
    ) -> Keys:
        """A shard's keys: kept, or derived from its ``base`` shard's (less the rows that left, plus
        the ``changed`` rows now in it), or computed from its rows; then kept for next time."""
        found = self.get(sha256)
        if found is not None:
            return found
        if base is not None:
            held = read(["sample_id"]).column("sample_id")
            keys = base.within(held)
            if changed is not None and changed.num_rows:
                mine = changed.filter(pc.is_in(changed.column("sample_id"), value_set=held.combine_chunks()))
                keys = Keys.concat(
                    [keys.without(mine.column("sample_id")), Keys.compute(mine, self.config)],
                    self.config.bands[0],
                )
        else:
            keys = Keys.compute(read(TEXT_COLUMNS), self.config)
        self.put(sha256, keys)
        return keys


@dataclass(frozen=True)
class Side:
    """Rows on one side of the split: their keys, and how to read the text columns of some of them."""

    held_out: bool
    keys: Keys
    texts: Callable[[list[str]], pa.Table]  # ids -> the rows of those ids this side holds (TEXT_COLUMNS)


def _matches(probe: _Array, other: _Array) -> tuple[_Array, _Array]:
    """Pairs (i, j) of a probe row i and an other row j sharing a key in some band."""
    found_i: list[int] = []
    found_j: list[int] = []
    for band in range(probe.shape[1]):
        column = other[:, band]
        hit = np.flatnonzero(np.isin(column, probe[:, band]))
        if not len(hit):
            continue
        order = np.argsort(probe[:, band], kind="stable")
        ordered = probe[order, band]
        low = np.searchsorted(ordered, column[hit], "left")
        high = np.searchsorted(ordered, column[hit], "right")
        for j, a, b in zip(hit, low, high, strict=True):
            found_i.extend(int(x) for x in order[a:b])
            found_j.extend([int(j)] * int(b - a))
    if not found_i:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pairs = np.unique(np.stack([np.array(found_i, np.int64), np.array(found_j, np.int64)], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def _verified(pairs: list[tuple[str, str]], rows: pa.Table, config: DedupConfig) -> list[Leak]:
    """The (held-out id, other id) pairs at or above the threshold, or of the same normalized text:
    exact Jaccard of the shingle sets, as the full check does for a version of its size."""
    if not pairs:
        return []
    at = {sid: i for i, sid in enumerate(rows.column("sample_id").to_pylist())}
    hashed = compute_signatures(audit_texts(rows), config, keep_shingles=True)
    assert hashed.shingles is not None
    left = np.array([at[a] for a, _ in pairs], np.int64)
    right = np.array([at[b] for _, b in pairs], np.int64)
    score = hashed.shingles.jaccard(left, right)
    same = hashed.exact[left] == hashed.exact[right]
    leaks = [
        Leak(other, held, 1.0 if exact else round(float(s), 4))
        for (held, other), s, exact in zip(pairs, score, same, strict=True)
        if exact or s >= config.threshold
    ]
    return sorted(leaks, key=lambda x: (x.validation_id, x.train_id))


def _texts_for(pairs: list[tuple[str, str]], sides: Sequence[Side], probe: pa.Table | None) -> pa.Table:
    wanted = sorted({i for pair in pairs for i in pair})
    parts = []
    if probe is not None:
        parts.append(
            probe.filter(pc.is_in(probe.column("sample_id"), value_set=pa.array(wanted, pa.string())))
        )
    for side in sides:
        have = {i for p in parts for i in p.column("sample_id").to_pylist()}
        need = [i for i in wanted if i not in have]
        if not need:
            break
        parts.append(side.texts(need))
    return pa.concat_tables([p.select(TEXT_COLUMNS) for p in parts])


def probe_leaks(
    probe: pa.Table,
    held_out: bool,
    sides: Sequence[Side],
    config: DedupConfig,
    probe_keys: Keys | None = None,
) -> list[Leak]:
    """Leaks between the ``probe`` rows (held out or not) and the rows of every side across from
    them: candidates through the band keys, verified on exact Jaccard. Costs the probe rows'
    hashing and one pass over the other sides' keys."""
    keys = probe_keys if probe_keys is not None else Keys.compute(probe, config)
    pairs: set[tuple[str, str]] = set()
    for side in sides:
        if side.held_out == held_out or not len(side.keys.ids) or not len(keys.ids):
            continue
        i, j = _matches(keys.keys, side.keys.keys)
        mine, theirs = keys.ids.take(pa.array(i)).to_pylist(), side.keys.ids.take(pa.array(j)).to_pylist()
        for a, b in zip(mine, theirs, strict=True):
            if a != b:
                pairs.add((a, b) if held_out else (b, a))
    ordered = sorted(pairs)
    return _verified(ordered, _texts_for(ordered, sides, probe), config)


def crossing_leaks(sides: Sequence[Side], config: DedupConfig) -> list[Leak]:
    """Every leak between held-out rows and rows of the other sides (the full check, on kept keys)."""
    if not any(s.held_out for s in sides) or all(s.held_out for s in sides):
        return []
    every = Keys.concat([s.keys for s in sides], config.bands[0])
    held = np.concatenate([np.full(len(s.keys.ids), s.held_out) for s in sides])
    found = candidate_pairs(every.keys) if len(every.ids) else np.zeros((0, 2), np.int64)
    found = found[held[found[:, 0]] != held[found[:, 1]]]
    ids = every.ids.to_pylist()
    pairs = sorted({(ids[a], ids[b]) if held[a] else (ids[b], ids[a]) for a, b in found})
    return _verified(pairs, _texts_for(pairs, sides, None), config)


def version_sides(
    shards: Mapping[str, list[ShardInfo]],
    buckets: Mapping[str, int],
    read: Callable[[str, list[str]], pa.Table],
    cache: KeyCache,
    *,
    replaced: Mapping[str, ShardInfo | None] | None = None,
    changed: Mapping[str, pa.Table] | None = None,
    exclude: pa.Array | None = None,
    held_out: str = "validation",
    across: Sequence[str] | None = None,
) -> list[Side]:
    """A version's splits as leak-check sides: each shard's kept keys (a rewritten shard's derived
    from the shard it ``replaced`` and the ``changed`` rows), less the ``exclude`` ids; texts read
    from the shards of the buckets asked for. ``across``: only the sides across from these splits
    (where probes come from)."""
    replaced, changed = replaced or {}, changed or {}
    sides = []
    for split, listed in shards.items():
        if across is not None and not any((split == held_out) != (s == held_out) for s in across):
            continue  # no probe comes from across this side: its keys are not needed
        parts = []
        for shard in listed:
            base = replaced.get(shard.file)
            parts.append(
                cache.keys_of(
                    shard.sha256,
                    functools.partial(read, shard.file),
                    base=cache.get(base.sha256) if base is not None else None,
                    changed=changed.get(split),
                )
            )
        keys = Keys.concat(parts, cache.config.bands[0])
        if exclude is not None:
            keys = keys.without(exclude)
        files = [s.file for s in listed]

        def texts(ids: list[str], files: list[str] = files, count: int = buckets[split]) -> pa.Table:
            wanted = pa.array(ids, pa.string())
            found = [read(f, TEXT_COLUMNS) for f in bucket_files(wanted, files, count)]
            table = pa.concat_tables(found) if found else SAMPLE_SCHEMA.empty_table().select(TEXT_COLUMNS)
            mask = pc.is_in(table.column("sample_id"), value_set=wanted)
            if exclude is not None:
                mask = pc.and_(mask, pc.invert(pc.is_in(table.column("sample_id"), value_set=exclude)))
            return table.filter(mask)

        sides.append(Side(split == held_out, keys, texts))
    return sides
