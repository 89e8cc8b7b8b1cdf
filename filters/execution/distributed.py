"""Execution validation on a Ray cluster: every node runs jobs in its own sandbox pool.

:class:`RaySandbox` is a :class:`~ptfactory.filters.execution.base.Sandbox`, so
:func:`~ptfactory.filters.execution.validate.validate_samples` runs unchanged on it (the same
programs, the same grading, the same statuses). One actor per node holds that node's warm pool
(:func:`~ptfactory.filters.execution.select.open_sandbox`: the node's own Docker engine, or its
bubblewrap fallback); jobs go to the actors in chunks, round-robin, and come back in order. A chunk
whose node died is sent again to a live node: a job runs in a fresh container either way, so
running it twice changes nothing but the time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.limits import ExecResult, Limits

__all__ = ["ChunkRecord", "RaySandbox"]


class _NodePool:
    """A Ray actor: the sandbox pool of the node it was placed on."""

    def __init__(self, limits: Limits | None, workers: int | None, backend: str) -> None:
        import ray

        from ptfactory.filters.execution.select import open_sandbox

        self.node = str(ray.get_runtime_context().get_node_id())
        self.sandbox = open_sandbox(limits, workers, backend)

    def run_chunk(self, jobs: list[Job], limits: Limits | None) -> tuple[list[ExecResult], str, str, float]:
        started = time.perf_counter()
        results = self.sandbox.run_many(jobs, limits)
        return results, self.node, self.sandbox.backend, time.perf_counter() - started

    def close(self) -> None:
        self.sandbox.close()


@dataclass
class ChunkRecord:
    node: str
    jobs: int
    seconds: float


@dataclass
class RaySandbox(Sandbox):
    """Jobs fanned out to one sandbox pool per alive node of the connected Ray cluster.

    ``workers``: each node's pool size (default: that node's cores); ``chunk_jobs``: jobs per Ray
    task; ``backend``: as ``sandbox.backend`` in factory.yaml, on every node.
    """

    pool_limits: Limits | None = None
    pool_workers: int | None = None
    backend_choice: str = "auto"
    chunk_jobs: int = 100
    chunks: list[ChunkRecord] = field(default_factory=list)
    resent: int = 0  # chunks sent again after their node died
    _actors: dict[str, Any] = field(default_factory=dict)
    backend: str = "ray"

    def __post_init__(self) -> None:
        super().__init__(self.pool_limits, self.pool_workers)
        if self.chunk_jobs < 1:
            raise ValueError(f"chunk_jobs must be >= 1, got {self.chunk_jobs}")

    def _pools(self) -> list[Any]:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from ptfactory.filters.dedup.distributed import alive_nodes

        nodes = alive_nodes()
        if not nodes:
            raise RuntimeError("the Ray cluster has no alive node with CPUs; check `ray status`")
        actor = ray.remote(num_cpus=0, max_restarts=0)(_NodePool)
        for node in nodes:
            if node not in self._actors:
                self._actors[node] = actor.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
                ).remote(self.pool_limits, self.pool_workers, self.backend_choice)
        for node in list(self._actors):
            if node not in nodes:
                self._actors.pop(node)
        return [self._actors[n] for n in nodes]

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        return self.run_many([Job(files, command)], limits)[0]

    def run_many(self, jobs: Sequence[Job], limits: Limits | None = None) -> list[ExecResult]:
        import ray

        if not jobs:
            return []
        limits = limits or self.limits
        pending = {
            start: list(jobs[start : start + self.chunk_jobs])
            for start in range(0, len(jobs), self.chunk_jobs)
        }
        done: dict[int, list[ExecResult]] = {}
        backends = set()
        while pending:
            pools = self._pools()
            refs = {
                pools[i % len(pools)].run_chunk.remote(chunk, limits): start
                for i, (start, chunk) in enumerate(pending.items())
            }
            for ref, start in refs.items():
                try:
                    results, node, backend, seconds = ray.get(ref)
                except ray.exceptions.RayActorError:  # its node died: the chunk goes round again
                    self.resent += 1
                    continue
                done[start] = results
                backends.add(backend)
                self.chunks.append(ChunkRecord(node, len(results), seconds))
                pending.pop(start)
        self.backend = "ray:" + "+".join(sorted(backends))
        return [r for start in sorted(done) for r in done[start]]

    def close(self) -> None:
        import ray

        for actor in self._actors.values():
            try:
                ray.get(actor.close.remote())
            except ray.exceptions.RayActorError:
                pass
            ray.kill(actor)
        self._actors.clear()
