"""Routing: auto-accept, auto-reject, or send to expert review, within a per-batch review budget.

- accept: judge mean >= ``accept_at`` and spread <= ``max_spread``
- reject: judge mean <= ``reject_at``
- review: everything else, the highest disagreement (spread) first, up to ``review_budget`` rows
  per batch; the rest ``wait`` for the next budget (kept, never dropped)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pyarrow as pa

from ptfactory.storage.schema import add_decision, live_rows

__all__ = ["ROUTES", "RoutingConfig", "route"]

STAGE = "route"
ROUTES = ("auto_accept", "needs_review", "waiting", "auto_reject")


@dataclass(frozen=True)
class RoutingConfig:
    accept_at: float = 7.0
    max_spread: float = 3.0
    reject_at: float = 3.0
    review_budget: int = 50
    silent: str = "review"  # rows no judge could score: review | accept | reject


def route(table: pa.Table, config: RoutingConfig) -> tuple[pa.Table, Counter[str]]:
    """Every row back with a ``route`` decision: accept, reject (a drop), route, or wait."""
    rows = table.to_pylist()
    live = live_rows(table)
    verdict: dict[int, tuple[str, str, str]] = {}
    review: list[tuple[float, str, int]] = []
    for i in live:
        scores = rows[i]["scores"] or {}
        mean, spread = scores.get("judge_mean"), scores.get("judge_spread")
        if mean is None:
            if config.silent == "accept":
                verdict[i] = ("accept", "auto_accept", "no counted judge vote; routing.silent is accept")
            elif config.silent == "reject":
                verdict[i] = ("reject", "auto_reject", "no counted judge vote; routing.silent is reject")
            else:
                review.append((float("inf"), rows[i]["sample_id"], i))  # a human must look
            continue
        detail = f"mean {mean:.2f}, spread {spread:.2f}"
        if mean >= config.accept_at and (spread or 0.0) <= config.max_spread:
            verdict[i] = ("accept", "auto_accept", detail)
        elif mean <= config.reject_at:
            verdict[i] = ("reject", "auto_reject", detail)
        else:
            review.append((float(spread or 0.0), rows[i]["sample_id"], i))
    review.sort(key=lambda item: (-item[0], item[1]))  # most disagreement first; ties by id, deterministic
    for position, (spread, _, i) in enumerate(review):
        why = "no counted judge vote" if spread == float("inf") else f"spread {spread:.2f}"
        if position < config.review_budget:
            verdict[i] = ("route", "needs_review", why)
        else:
            verdict[i] = ("wait", "waiting", f"{why}; review budget of {config.review_budget} used")
    counts = Counter(verdict[i][1] for i in live)
    routed = add_decision(
        table,
        STAGE,
        [verdict[i][0] for i in live],
        [verdict[i][1] for i in live],
        [verdict[i][2] for i in live],
        rows=live,
    )
    return routed, counts
