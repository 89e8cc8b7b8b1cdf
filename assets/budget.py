"""Budgets in the stage assets: each asset's guard, what a stage does when the budget stops it, and
the spent-vs-budget metadata (limits, ledger and the engines' side: ``engines/budget.py``).

A stage that the budget stops keeps what finished and records the rest:

- :func:`within_budget` (row stages: responses, difficulty, judges) runs the stage; when the budget
  stops it, it replays the stage from the cache alone (nothing is sent) over the longest prefix of
  its rows whose requests all finished (a binary search), keeps that result, and returns the other
  rows with a ``budget_exhausted`` decision (rows an earlier stage dropped pass as they came).
- :func:`largest_within` does the search; the instruction stage uses it on its counts.
- :func:`held_back`: routing of a batch that stopped at its budget while ``budget.publish_partial``
  is false gives every live row a ``budget_exhausted`` decision, so none is reviewed or published.

A stage after the stop sends nothing (the run's spending is past the limit) but still finishes every
row whose requests are in the cache. A rerun with a larger budget re-sends no finished request.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.engines.base import Engine
from ptfactory.engines.budget import (
    BUDGET_TAG,
    LEDGER_FILE,
    BudgetExhausted,
    BudgetGuard,
    BudgetLedger,
    effective_budget,
)
from ptfactory.storage.schema import add_decision, dropped_mask
from ptfactory.storage.schema.review import BUDGET_REASON, budget_exhausted_mask

__all__ = [
    "budget_metadata",
    "held_back",
    "largest_within",
    "metered",
    "stage_guard",
    "within_budget",
]

R = TypeVar("R")


def stage_guard(context: dg.AssetExecutionContext, settings: SettingsResource, asset: str) -> BudgetGuard:
    """The budget of ``asset`` in this run: factory.yaml's, with the run's ``ptf/budget`` tag on top."""
    return BudgetGuard(
        budget=effective_budget(settings.config.budget, context.run.tags.get(BUDGET_TAG)),
        ledger=BudgetLedger(settings.state_dir / LEDGER_FILE),
        run_id=context.run.run_id,
        batch=context.partition_key,
        asset=asset,
    )


@contextmanager
def metered(guard: BudgetGuard, engines: Sequence[tuple[Engine, float]]) -> Iterator[BudgetGuard]:
    """Every engine (with its price per million tokens) asks ``guard`` before each chunk it sends."""
    distinct = {id(e): (e, p) for e, p in engines}.values()
    for engine, price in distinct:
        engine.budget = guard.meter(price)
    try:
        yield guard
    finally:
        for engine, _ in distinct:
            engine.budget = None


def largest_within(
    guard: BudgetGuard, engines: Sequence[Engine], attempt: Callable[[int], R], n: int, *, n_fails: bool
) -> tuple[int, R]:
    """The largest ``k <= n`` for which ``attempt(k)`` finishes from the cache alone, and its result.

    ``attempt(0)`` must need no request. ``n_fails``: ``attempt(n)`` is known not to finish. The
    engines' stats are left as they were: a replay sends nothing and is not the stage's work."""
    stats = [(e, copy.copy(e.stats)) for e in engines]
    guard.replay = True
    try:
        lo, best = 0, attempt(0)
        hi = n if n_fails else n + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                best, lo = attempt(mid), mid
            except BudgetExhausted:
                hi = mid
        return lo, best
    finally:
        guard.replay = False
        for engine, saved in stats:
            engine.stats = saved


def within_budget(
    guard: BudgetGuard,
    engines: Sequence[Engine],
    table: pa.Table,
    compute: Callable[[pa.Table], R],
    *,
    stage: str,
    domain: Sequence[int],
) -> tuple[R, pa.Table]:
    """``compute(table)``, or when the budget stops it, ``compute`` over the rows outside ``domain``
    plus the longest prefix of ``domain`` that finishes from the cache; second: the rest of
    ``domain`` (its live rows with a ``budget_exhausted`` decision; an empty table when nothing stopped)."""
    try:
        return compute(table), table.slice(0, 0)
    except BudgetExhausted:
        pass
    inside = set(domain)
    always = [i for i in range(table.num_rows) if i not in inside]

    def subset(k: int) -> pa.Table:
        return table.take(pa.array(sorted([*always, *domain[:k]]), pa.int64()))

    k, result = largest_within(guard, engines, lambda k: compute(subset(k)), len(domain), n_fails=True)
    rest = table.take(pa.array(list(domain[k:]), pa.int64()))
    live = [i for i, dropped in enumerate(dropped_mask(rest).to_pylist()) if not dropped]
    detail = f"{guard.stopped or 'the budget'}; a rerun with a larger budget finishes it (finished requests come from the cache)"
    marked = add_decision(
        rest, stage, ["drop"] * len(live), [BUDGET_REASON] * len(live), [detail] * len(live), rows=live
    )
    return result, marked


def held_back(table: pa.Table, stops: Sequence[tuple[str, str]]) -> pa.Table:
    """Every live row with a ``budget_exhausted`` decision of the routing stage: the batch stopped at
    its budget and ``budget.publish_partial`` is false, so nothing of it is reviewed or published."""
    live = [i for i, dropped in enumerate(dropped_mask(table).to_pylist()) if not dropped]
    where = "; ".join(f"{asset}: {reason}" for asset, reason in stops)
    detail = (
        f"held back: this run stopped at its budget ({where}) and budget.publish_partial is false; "
        "a rerun with a larger budget finishes the batch"
    )
    return add_decision(
        table, "route", ["drop"] * len(live), [BUDGET_REASON] * len(live), [detail] * len(live), rows=live
    )


def _limit(value: float | None, usd: bool) -> str:
    if value is None:
        return "none"
    return f"{value:.6f}" if usd else f"{int(value):,}"


def budget_metadata(
    guard: BudgetGuard, unfinished: pa.Table | None = None, *, held: int = 0
) -> dict[str, dg.MetadataValue]:
    """Spent vs budget: this asset, this run so far, this batch over all its runs; the limits; how
    many rows the budget left unfinished here (of ``unfinished``) or ``held`` back."""
    exhausted_rows = held
    if unfinished is not None and unfinished.num_rows:
        exhausted_rows += int(pc.sum(budget_exhausted_mask(unfinished)).as_py() or 0)
    run = guard.ledger.spent(run_id=guard.run_id)
    batch = guard.ledger.spent(batch=guard.batch)
    limits = guard.budget
    lines = [
        "| | tokens | usd |",
        "|---|---|---|",
        f"| this asset | {guard.spent.tokens:,} | {guard.spent.usd:.6f} |",
        f"| this run so far | {run.tokens:,} | {run.usd:.6f} |",
        f"| run budget | {_limit(limits.tokens, False)} | {_limit(limits.usd, True)} |",
        f"| this batch, all runs | {batch.tokens:,} | {batch.usd:.6f} |",
        f"| batch budget | {_limit(limits.batch_tokens, False)} | {_limit(limits.batch_usd, True)} |",
    ]
    metadata: dict[str, dg.MetadataValue] = {
        "budget": dg.MetadataValue.md("\n".join(lines)),
        "budget_spent_tokens": dg.MetadataValue.int(guard.spent.tokens),
        "budget_spent_usd": dg.MetadataValue.float(round(guard.spent.usd, 6)),
        "budget_run_spent_tokens": dg.MetadataValue.int(run.tokens),
        "budget_run_spent_usd": dg.MetadataValue.float(round(run.usd, 6)),
        "budget_exhausted": dg.MetadataValue.bool(guard.stopped is not None or exhausted_rows > 0),
        "budget_exhausted_rows": dg.MetadataValue.int(exhausted_rows),
    }
    for key, value in limits.limits().items():
        metadata[f"budget_{key}"] = (
            dg.MetadataValue.float(value) if key.endswith("usd") else dg.MetadataValue.int(int(value))
        )
    if guard.stopped:
        metadata["budget_stopped_at"] = dg.MetadataValue.text(guard.stopped)
    return metadata
