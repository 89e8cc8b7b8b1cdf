from collections.abc import Iterable

import pyarrow as pa

from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.storage.schema import from_records, sample_id


def _table(scores: Iterable[tuple[float | None, float | None]]) -> pa.Table:
    rows = []
    for i, (mean, spread) in enumerate(scores):
        messages = [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
        rows.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": "b",
                "kind": "sft",
                "messages": messages,
                "scores": {"judge_mean": mean, "judge_spread": spread},
                "decisions": [],
            }
        )
    return from_records(rows)


def test_thresholds() -> None:
    table, counts = route(
        _table([(9, 1), (8, 5), (2, 1), (5, 2), (None, None)]), RoutingConfig(review_budget=10)
    )
    reasons = [r["decisions"][-1]["reason"] for r in table.to_pylist()]
    assert reasons == ["auto_accept", "needs_review", "auto_reject", "needs_review", "needs_review"]
    assert counts == {"auto_accept": 1, "needs_review": 3, "auto_reject": 1}
    verdicts = [r["decisions"][-1]["verdict"] for r in table.to_pylist()]
    assert verdicts == ["accept", "route", "reject", "route", "route"]


def test_review_budget_takes_the_biggest_disagreements_and_the_rest_wait() -> None:
    spreads = [1.0, 6.0, 3.0, 8.0, 2.0, 5.0]
    table, counts = route(_table([(5.0, s) for s in spreads]), RoutingConfig(review_budget=3))
    rows = table.to_pylist()
    routed = [s for s, r in zip(spreads, rows, strict=True) if r["decisions"][-1]["reason"] == "needs_review"]
    assert sorted(routed) == [5.0, 6.0, 8.0]
    waiting = [r for r in rows if r["decisions"][-1]["reason"] == "waiting"]
    assert len(waiting) == 3 and all(r["decisions"][-1]["verdict"] == "wait" for r in waiting)
    assert "budget of 3 used" in waiting[0]["decisions"][-1]["detail"]
    assert counts == {"needs_review": 3, "waiting": 3}
    assert table.num_rows == 6  # nothing dropped


def test_rows_dropped_upstream_are_not_routed() -> None:
    table = _table([(9, 0), (9, 0)])
    trail = table.column("decisions").to_pylist()
    trail[1] = [{"stage": "dedup", "verdict": "drop", "reason": "near_duplicate", "detail": None}]
    table = table.set_column(
        table.schema.get_field_index("decisions"),
        "decisions",
        pa.array(trail, table.schema.field("decisions").type),
    )
    routed, counts = route(table, RoutingConfig())
    assert counts == {"auto_accept": 1}
    assert routed.to_pylist()[1]["decisions"][-1]["stage"] == "dedup"
