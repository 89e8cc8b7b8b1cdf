"""Batches run side by side on the CPU, each on its share of the threads.

On a small CPU a batch of a few rows does not keep its threads busy: a decoding step at a few
rows is a chain of narrow matrix-vector products, each too small for two threads to split well,
and between them come the attention, the cache update and Python's own work, all serial. Two
batches on one thread each keep both cores busy. Measured on 2 cores with the bundled SmolLM2
(two batches, one after the other on 2 threads, against side by side on 1 thread each): 1.6x at 2
rows a batch, 1.3x at 8, 1.2x at 16 and for a prefill of 16 x 181 tokens; bench/engines.py's
``transformers-1stream`` row gives the end-to-end figure.

The rows a batch holds and each row's seed do not change, so outputs are the same as one batch
after another (up to float rounding, as between batch sizes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["auto_streams", "balanced_batches", "dealt_batches", "run_streams"]

T = TypeVar("T")


def auto_streams(device: str, threads: int) -> int:
    """Two streams on a CPU with two or more threads, else one (a GPU runs one batch at a time)."""
    return 2 if device == "cpu" and threads >= 2 else 1


def balanced_batches(order: Sequence[int], size: int, streams: int) -> list[list[int]]:
    """``order`` cut into consecutive batches of at most ``size``, of near-equal sizes, their count
    a multiple of ``streams`` where there are rows enough (35 rows at 32 and 2 streams: 17 + 18,
    not 32 + 3, whose second batch would run alone)."""
    if not order:
        return []
    count = _batch_count(len(order), size, streams)
    cuts = [len(order) * k // count for k in range(count + 1)]
    return [list(order[cuts[k] : cuts[k + 1]]) for k in range(count)]


def dealt_batches(order: Sequence[int], size: int, streams: int) -> list[list[int]]:
    """As many batches as :func:`balanced_batches` cuts, ``order`` dealt out over them in turn
    (batch ``k`` takes rows ``k``, ``k + count``, ...): each batch gets its share of every stretch
    of ``order``. For rows sorted by their token budget, every batch then holds its share of
    the long ones, and the batches running side by side end together."""
    count = _batch_count(len(order), size, streams)  # 0 for no rows
    return [list(order[k::count]) for k in range(count)]


def _batch_count(rows: int, size: int, streams: int) -> int:
    """Batches of at most ``size`` for ``rows`` rows, rounded up to a multiple of ``streams`` (no
    more than one row a batch)."""
    count = -(-rows // size)
    if streams > 1:
        count = min(rows, -(-count // streams) * streams)
    return count


def run_streams(jobs: Sequence[Callable[[], T]], streams: int, threads: int) -> list[T]:
    """Every job's result, in order: up to ``streams`` jobs at once, each on ``threads // streams``
    torch threads (restored afterwards); one job or one stream runs here, on all ``threads``."""
    if streams <= 1 or len(jobs) <= 1:
        return [job() for job in jobs]
    import torch

    before = torch.get_num_threads()
    share = max(1, threads // streams)

    def run(job: Callable[[], T]) -> T:
        torch.set_num_threads(share)  # torch keeps the count per thread where OpenMP does
        return job()

    torch.set_num_threads(share)
    try:
        with ThreadPoolExecutor(max_workers=streams, thread_name_prefix="ptf-stream") as pool:
            return list(pool.map(run, jobs))
    finally:
        torch.set_num_threads(before)
