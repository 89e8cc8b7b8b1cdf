"""Worker processes for checks that must be bounded in time: math-verify, reasoning-gym's scorers.

A check that hangs (a sympy simplification that never ends, a computation stuck in C that ignores
signals) must cost one abstention, not a stalled stage or training run. :class:`WorkerPool` runs
module-level functions in ``spawn``ed processes (safe under threads; each task runs on a worker's
main thread, where ``signal.alarm``-based timeouts work) and waits at most ``hard_timeout_s`` for
each result: past it the pool is terminated and started again, and the task's outcome is a
:class:`Failed` with ``timeout=True``. A fresh worker first runs ``warmup`` (heavy imports); the
first tasks after a start get ``startup_s`` more, so a start-up is never a task's timeout. An exception in a task is a :class:`Failed` too. The pool is
picklable (a GRPO reward function holds one): a copy starts its own processes on first use.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import multiprocessing.process
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Failed", "WorkerPool"]


@dataclass(frozen=True)
class Failed:
    """A task that gave no result: it ran past the hard timeout, or raised."""

    error: str
    timeout: bool = False


class WorkerPool:
    """``workers`` processes, started on first use; ``workers=0`` runs tasks in the calling thread
    (no bound on time: for a main thread whose tasks bound themselves)."""

    def __init__(
        self,
        workers: int = 1,
        hard_timeout_s: float = 30.0,
        warmup: Callable[[], None] | None = None,
        startup_s: float = 120.0,
    ) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.workers = workers
        self.hard_timeout_s = hard_timeout_s
        self.warmup = warmup
        self.startup_s = startup_s
        self._pool: multiprocessing.pool.Pool | None = None
        self._cold = 0  # tasks still to wait for with the start-up allowance
        self._lock = threading.Lock()  # one batch at a time may restart the pool
        self._spawn_checked = False

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_pool"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _started(self) -> multiprocessing.pool.Pool:
        if self._pool is None:
            # the first start also starts a bare test process: it runs beside the workers' warm-up,
            # so waiting for it costs next to nothing, and it names why workers cannot start
            probe = None if self._spawn_checked else _start_probe()
            self._pool = multiprocessing.get_context("spawn").Pool(self.workers, initializer=self.warmup)
            if probe is not None:
                try:
                    _finish_probe(probe, self.startup_s)
                except RuntimeError:
                    self._terminate()
                    raise
                self._spawn_checked = True
            self._cold = self.workers
        return self._pool

    def _terminate(self) -> None:
        if self._pool is not None:
            self._pool.terminate()  # the stuck worker with the rest: a Pool cannot kill only one
            self._pool.join()
            self._pool = None

    def run_many(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``fn(*args)`` for each ``args`` of ``calls``, in order; a :class:`Failed` where one gave
        no result. ``fn`` must be a module-level function (workers import it by name)."""
        if not calls:
            return []
        if self.workers == 0:
            return [_inline(fn, args) for args in calls]
        with self._lock:
            results: list[Any] = [None] * len(calls)
            todo = list(range(len(calls)))
            while todo:
                pool = self._started()
                pending = [(i, pool.apply_async(fn, calls[i])) for i in todo]
                todo = []
                for position, (index, handle) in enumerate(pending):
                    allowance = self.startup_s if self._cold > 0 else 0.0
                    self._cold -= 1
                    try:
                        results[index] = handle.get(self.hard_timeout_s + allowance)
                    except multiprocessing.TimeoutError:
                        results[index] = Failed(f"no result within {self.hard_timeout_s:g} s", timeout=True)
                        self._terminate()
                        todo = [i for i, _ in pending[position + 1 :]]  # again, on a fresh pool
                        break
                    except Exception as exc:  # the task raised, or its result would not pickle
                        results[index] = Failed(f"{type(exc).__name__}: {exc}"[:300])
            return results

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool.join()
                self._pool = None

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _ready() -> None:
    """What a test process runs: nothing (it only has to start)."""


def _start_probe() -> multiprocessing.process.BaseProcess:
    process = multiprocessing.get_context("spawn").Process(target=_ready, daemon=True)
    process.start()
    return process


def _finish_probe(process: multiprocessing.process.BaseProcess, timeout_s: float) -> None:
    """Fail with the reason when the test process could not start: a ``multiprocessing.Pool``
    whose workers die while starting replaces them forever, so every task would wait out its
    timeout while the log fills with the same traceback. Spawned processes re-import the
    ``__main__`` module: a script read from stdin cannot be, and a script without an
    ``if __name__ == "__main__":`` guard runs again in the child."""
    process.join(timeout_s)
    if process.is_alive():
        process.terminate()
        process.join()
    if process.exitcode != 0:
        main = getattr(sys.modules.get("__main__"), "__file__", None) or "the interactive session"
        raise RuntimeError(
            f"the checkers' worker processes cannot start (a test process exited with "
            f"{process.exitcode}): each one re-imports the main module ({main}). Run your code from a "
            'file with an `if __name__ == "__main__":` guard, or make the pool with workers=0 to run '
            "checks in this process (without their time bound): `MathVerifyPool(workers=0)`."
        )


def _inline(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # as in a worker: the task's failure, named
        return Failed(f"{type(exc).__name__}: {exc}"[:300])
