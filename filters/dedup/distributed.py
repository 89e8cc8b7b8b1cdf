"""Dedup on a Ray cluster: the in-process rules, with the heavy parts fanned out as Ray tasks.

1. **Hash** (one task per shard of ``shard_rows`` texts): signatures, exact-text keys and shingle
   sets by :func:`~ptfactory.filters.dedup.core.compute_signatures`, band keys by
   :func:`~ptfactory.filters.dedup.lsh.band_keys`; the band keys stay in the object store.
2. **Band shuffle** (a two-stage map-reduce): each shard's map task sends every (band, key, row)
   of the rows that take part in LSH to partition ``hash(band, key) % partitions``; each reduce
   task holds every member of its buckets and finds their pairs with
   :func:`~ptfactory.filters.dedup.lsh.candidate_pairs`, band by band, rows in the same order as
   in-process, so the pair set (star links of huge buckets included) is the same one.
3. **Clusters**: :func:`~ptfactory.filters.dedup.core.deduplicate` gets the hashes and the shuffled
   candidates and does the rest as it does in-process (verification, union-find connected
   components, the keeper rule); the output is identical row for row, by construction.

Tasks are placed round-robin over the alive nodes (soft affinity: a task whose node died runs
elsewhere) and are retried by Ray when a node dies; a lost intermediate result is rebuilt from its
lineage, so a killed worker costs time, not rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ptfactory.filters.dedup.core import (
    DedupConfig,
    DedupResult,
    Hashed,
    Shingles,
    compute_signatures,
    deduplicate,
)
from ptfactory.filters.dedup.lsh import band_keys, candidate_pairs

__all__ = ["RayDedup", "ShuffleReport", "alive_nodes", "node_strategy"]

_MIX = np.uint64(0x9E3779B97F4A7C15)


def alive_nodes() -> list[str]:
    """Node ids of the alive nodes that have CPUs, in a stable order."""
    import ray

    listing: Any = ray.nodes  # untyped in Ray
    return sorted(n["NodeID"] for n in listing() if n["Alive"] and n["Resources"].get("CPU", 0) > 0)


def node_strategy(nodes: list[str], i: int) -> Any:
    """The ``i``-th task's placement: round-robin over ``nodes``; soft, so a dead node's task moves."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(nodes[i % len(nodes)], soft=True)


def _node() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _hash_shard(texts: pa.Array, config: DedupConfig, keep_shingles: bool) -> tuple[Any, np.ndarray]:
    """(the shard's hashes, node and seconds; its band keys): a Ray task, one per shard."""
    started = time.perf_counter()
    hashed = compute_signatures(texts, config.model_copy(update={"workers": 1}), keep_shingles)
    keys = band_keys(hashed.signatures, *config.bands)
    return (hashed, _node(), time.perf_counter() - started), keys


def _partition(keys: np.ndarray, offset: int, usable: np.ndarray, partitions: int) -> list[Any]:
    """The map side of the shuffle: this shard's (band, key, position among ``usable``) rows split
    by partition, then the node it ran on and its seconds."""
    started = time.perf_counter()
    rows = offset + np.arange(len(keys), dtype=np.int64)
    position = np.searchsorted(usable, rows)
    member = position < len(usable)
    member[member] = usable[position[member]] == rows[member]
    keys, position = keys[member], position[member]
    bands = keys.shape[1]
    band = np.repeat(np.arange(bands, dtype=np.int64)[None, :], len(keys), axis=0).ravel()
    flat = keys.ravel()
    pos = np.repeat(position, bands)
    target = ((flat ^ (band.astype(np.uint64) * _MIX)) % np.uint64(partitions)).astype(np.int64)
    order = np.argsort(target, kind="stable")
    cuts = np.searchsorted(target[order], np.arange(1, partitions))
    out: list[Any] = [(band[part], flat[part], pos[part]) for part in np.split(order, cuts)]
    return [*out, (_node(), time.perf_counter() - started)]


def _bucket_pairs(*parts: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, str, float]:
    """The reduce side: every bucket of this partition is whole here; its pairs, as
    :func:`candidate_pairs` finds them in-process (rows in position order within a band)."""
    started = time.perf_counter()
    band = np.concatenate([p[0] for p in parts])
    key = np.concatenate([p[1] for p in parts])
    pos = np.concatenate([p[2] for p in parts])
    order = np.lexsort((pos, band))
    band, key, pos = band[order], key[order], pos[order]
    found = [np.zeros((0, 2), dtype=np.int64)]
    for chunk in np.split(np.arange(len(band)), np.nonzero(np.diff(band))[0] + 1) if len(band) else []:
        local = candidate_pairs(key[chunk][:, None])
        found.append(pos[chunk][local])
    return np.concatenate(found), _node(), time.perf_counter() - started


@dataclass
class ShuffleReport:
    """What the last run did where: the evidence that it was spread and that the shuffle crossed nodes."""

    hash_nodes: list[str] = field(default_factory=list)
    hash_seconds: list[float] = field(default_factory=list)  # per shard
    map_nodes: list[str] = field(default_factory=list)
    map_seconds: list[float] = field(default_factory=list)
    reduce_nodes: list[str] = field(default_factory=list)
    reduce_seconds: list[float] = field(default_factory=list)
    pairs: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def crossed_nodes(self) -> int:
        """Reduce partitions that read map output written on another node."""
        return sum(1 for node in self.reduce_nodes if any(m != node for m in self.map_nodes))


@dataclass
class RayDedup:
    """``deduplicate`` with the same contract, run on the connected Ray cluster (``ray.init`` first).

    ``shard_rows`` texts per hash task; ``partitions`` reduce tasks of the band shuffle (default
    two per node).
    """

    shard_rows: int = 10_000
    partitions: int = 0
    report: ShuffleReport = field(default_factory=ShuffleReport)

    def __post_init__(self) -> None:
        if self.shard_rows < 1:
            raise ValueError(f"shard_rows must be >= 1, got {self.shard_rows}")
        if self.partitions < 0:
            raise ValueError(f"partitions must be >= 0 (0: two per node), got {self.partitions}")

    def __call__(
        self,
        texts: pa.Array | pa.ChunkedArray | list[str | None],
        config: DedupConfig | None = None,
        priority: np.ndarray | None = None,
    ) -> DedupResult:
        import ray

        config = config or DedupConfig()
        array = texts if isinstance(texts, pa.Array | pa.ChunkedArray) else pa.array(texts, pa.string())
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        nodes = alive_nodes()
        if not nodes:
            raise RuntimeError("the Ray cluster has no alive node with CPUs; check `ray status`")
        report = self.report = ShuffleReport()
        started = time.perf_counter()
        keep_shingles = len(array) <= config.exact_verify_max_docs  # the in-process rule
        hash_task: Any = ray.remote(num_returns=2, num_cpus=1)(_hash_shard)
        offsets = list(range(0, len(array), self.shard_rows)) or [0]
        hashed_refs, key_refs = [], []
        for i, offset in enumerate(offsets):
            shard = array.slice(offset, self.shard_rows)
            h, k = hash_task.options(scheduling_strategy=node_strategy(nodes, i)).remote(
                shard, config, keep_shingles
            )
            hashed_refs.append(h)
            key_refs.append(k)
        shards = ray.get(hashed_refs)
        report.hash_nodes = [s[1] for s in shards]
        report.hash_seconds = [s[2] for s in shards]
        parts: list[Hashed] = [s[0] for s in shards]
        hashed = Hashed(
            np.concatenate([p.signatures for p in parts]),
            np.concatenate([p.exact for p in parts]),
            Shingles.concat([p.shingles for p in parts if p.shingles]) if keep_shingles else None,
        )
        report.stage_seconds["hash"] = time.perf_counter() - started
        partitions = self.partitions or 2 * len(nodes)

        def shuffled(usable: np.ndarray) -> np.ndarray:
            began = time.perf_counter()
            usable_ref = ray.put(usable)
            map_task: Any = ray.remote(num_returns=partitions + 1, num_cpus=1)(_partition)
            reduce_task: Any = ray.remote(num_returns=1, num_cpus=1)(_bucket_pairs)
            mapped = [
                map_task.options(scheduling_strategy=node_strategy(nodes, i)).remote(
                    keys, offset, usable_ref, partitions
                )
                for i, (keys, offset) in enumerate(zip(key_refs, offsets, strict=True))
            ]
            reduced = [
                reduce_task.options(scheduling_strategy=node_strategy(nodes, p)).remote(
                    *[m[p] for m in mapped]
                )
                for p in range(partitions)
            ]
            results = ray.get(reduced)
            where = ray.get([m[partitions] for m in mapped])
            report.map_nodes = [w[0] for w in where]
            report.map_seconds = [w[1] for w in where]
            report.reduce_nodes = [r[1] for r in results]
            report.reduce_seconds = [r[2] for r in results]
            found = [r[0] for r in results if len(r[0])]
            report.stage_seconds["shuffle"] = time.perf_counter() - began
            if not found:
                return np.zeros((0, 2), dtype=np.int64)
            pairs: np.ndarray = np.unique(np.sort(np.concatenate(found), axis=1), axis=0)
            report.pairs = len(pairs)
            return pairs

        began = time.perf_counter()
        result = deduplicate(array, config, priority, hashed=hashed, candidates=shuffled)
        report.stage_seconds["cluster"] = time.perf_counter() - began - report.stage_seconds.get("shuffle", 0)
        result.seconds = time.perf_counter() - started
        return result
