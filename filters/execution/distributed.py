"""Execution validation on a Ray cluster: every node runs jobs in its own sandbox pool.

:class:`RaySandbox` is a :class:`~ptfactory.filters.execution.base.Sandbox`, so
:func:`~ptfactory.filters.execution.validate.validate_samples` runs unchanged on it (the same
programs, the same grading, the same statuses). One actor per node holds that node's warm pool
(:func:`~ptfactory.filters.execution.select.open_sandbox`: the node's own Docker engine, or its
bubblewrap fallback). Jobs go to the actors in chunks, pulled as the actors free up (each holds
``in_flight`` chunks, so its pool never waits on the driver and a slow node takes fewer), and
come back in order. A chunk whose node died is sent again to a live node, and that node is not
used again by this sandbox: a job runs in a fresh directory of a warm container either way, so
running it twice changes nothing but the time, and only the second run's result is kept.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.limits import ExecResult, Limits

__all__ = ["ChunkRecord", "RaySandbox"]

_MAX_SENDS = 4  # a chunk whose nodes keep dying this many times in a row fails the stage
_MAX_ROUNDS = 60  # times every alive node is tried again after all were lost (a second apart)


class _NodePool:
    """A Ray actor: the sandbox pool of the node it was placed on."""

    def __init__(self, limits: Limits | None, workers: int | None, backend: str) -> None:
        import ray

        from ptfactory.filters.execution.select import open_sandbox

        self.node = str(ray.get_runtime_context().get_node_id())
        self.sandbox = open_sandbox(limits, workers, backend)

    def describe(self) -> tuple[str, str, str | None]:
        """(node id, backend, the pool's container label ``ptf.sandbox`` if Docker)."""
        return self.node, self.sandbox.backend, getattr(self.sandbox, "session", None)

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
    start: int = 0  # index of the chunk's first job in the run_many call


@dataclass
class RaySandbox(Sandbox):
    """Jobs fanned out to one sandbox pool per alive node of the connected Ray cluster.

    ``workers``: each node's pool size (default: that node's cores); ``chunk_jobs``: jobs per Ray
    task; ``backend``: as ``sandbox.backend`` in factory.yaml, on every node; ``in_flight``:
    chunks each node holds at once (the next one starts while the last jobs of the other finish).
    """

    pool_limits: Limits | None = None
    pool_workers: int | None = None
    backend_choice: str = "auto"
    chunk_jobs: int = 100
    in_flight: int = 2
    chunks: list[ChunkRecord] = field(default_factory=list)
    resent: int = 0  # chunks sent again after their node died
    lost_nodes: set[str] = field(default_factory=set)  # nodes whose pool died under a chunk
    sessions: dict[str, str] = field(default_factory=dict)  # node -> its Docker pool's label
    _actors: dict[str, Any] = field(default_factory=dict)
    _rounds: int = 0
    backend: str = "ray"

    def __post_init__(self) -> None:
        super().__init__(self.pool_limits, self.pool_workers)
        if self.chunk_jobs < 1:
            raise ValueError(f"chunk_jobs must be >= 1, got {self.chunk_jobs}")
        if self.in_flight < 1:
            raise ValueError(f"in_flight must be >= 1, got {self.in_flight}")

    def _pools(self) -> dict[str, Any]:
        """node id -> its pool's actor, for the alive nodes this sandbox has not lost (all alive
        nodes again if it lost every one: a pool can die with its node still up)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from ptfactory.filters.dedup.distributed import alive_nodes

        alive = alive_nodes()
        nodes = [n for n in alive if n not in self.lost_nodes]
        if not nodes and alive:
            self._rounds += 1
            if self._rounds > _MAX_ROUNDS:
                raise RuntimeError(
                    f"no node's sandbox pool stayed up (lost {len(self.lost_nodes)} nodes, {_MAX_ROUNDS} rounds); "
                    "check `ray status` and the nodes' logs"
                )
            time.sleep(1.0)  # a dead node stays listed as alive until Ray's health checks fail
            self.lost_nodes.clear()
            nodes = alive
        if not nodes:
            raise RuntimeError("the Ray cluster has no alive node with CPUs; check `ray status`")
        actor: Any = ray.remote(num_cpus=0, max_restarts=0)(_NodePool)
        started = {}
        for node in nodes:
            if node not in self._actors:
                self._actors[node] = started[node] = actor.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
                    max_concurrency=self.in_flight,  # its chunks share the node's pool
                ).remote(self.pool_limits, self.pool_workers, self.backend_choice)
        for node, described in zip(started, self._describe(started), strict=True):
            if described is None:
                self._lose(node)
            elif described[2]:
                self.sessions[node] = described[2]
        for node in list(self._actors):
            if node not in nodes:
                self._actors.pop(node)
        return {n: self._actors[n] for n in nodes if n in self._actors}

    @staticmethod
    def _describe(actors: dict[str, Any]) -> list[tuple[str, str, str | None] | None]:
        """Each new pool's description once it is open; None for one whose node died meanwhile.
        A pool that cannot open (no Docker engine, no image on that node) fails here, before any
        job is sent, with its own message."""
        import ray

        from ptfactory.errors import SandboxError

        out: list[tuple[str, str, str | None] | None] = []
        for node, ref in [(n, a.describe.remote()) for n, a in actors.items()]:
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayActorError as exc:
                if exc.actor_init_failed:
                    reason = (str(exc).strip().splitlines() or ["no message"])[-1]
                    raise SandboxError(
                        f"the sandbox pool of Ray node {node} did not open: {reason}"
                    ) from None
                out.append(None)
        return out

    def _lose(self, node: str) -> None:
        import ray

        self.lost_nodes.add(node)
        actor = self._actors.pop(node, None)
        if actor is not None:
            ray.kill(actor, no_restart=True)

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        return self.run_many([Job(files, command)], limits)[0]

    def run_many(self, jobs: Sequence[Job], limits: Limits | None = None) -> list[ExecResult]:
        import ray

        if not jobs:
            return []
        limits = limits or self.limits
        self._rounds = 0  # the limit is per call: a long-lived sandbox may lose every node again later
        pending = deque(range(0, len(jobs), self.chunk_jobs))  # chunks by their first job
        sends: Counter[int] = Counter()
        running: dict[Any, tuple[int, str]] = {}  # task -> (chunk, node)
        done: dict[int, list[ExecResult]] = {}
        backends = set()
        while pending or running:
            if pending:
                pools = self._pools()
                held = Counter(node for _, node in running.values())
                for node, pool in pools.items():
                    while pending and held[node] < self.in_flight:
                        start = pending.popleft()
                        sends[start] += 1
                        if sends[start] > _MAX_SENDS:
                            raise RuntimeError(
                                f"a validation chunk was sent {_MAX_SENDS} times and its node died each "
                                "time; check `ray status` and the nodes' logs"
                            )
                        chunk = list(jobs[start : start + self.chunk_jobs])
                        running[pool.run_chunk.remote(chunk, limits)] = (start, node)
                        held[node] += 1
            if not running:  # every pool just started was on a node that died: look again
                continue
            ready = ray.wait(list(running), num_returns=1)[0][0]
            start, node = running.pop(ready)
            try:
                results, where, backend, seconds = ray.get(ready)
            except ray.exceptions.RayActorError:  # its node (or its pool) died: the chunk goes round again
                self.resent += 1
                self._lose(node)
                pending.appendleft(start)
                continue
            done[start] = results
            backends.add(backend)
            self.chunks.append(ChunkRecord(where, len(results), seconds, start))
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
