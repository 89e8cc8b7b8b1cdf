from collections.abc import Iterable

import pyarrow as pa

from ptfactory.annotators.routing import CONFIDENCE_WEIGHT, RoutingConfig, audit_draw, route, uncertainty
from ptfactory.storage.schema import audited_verdict, from_records, latest_copies, live_rows, sample_id

NO_AUDIT = {"audit_rate": 0.0}


def _table(
    scores: Iterable[tuple[float | None, float | None] | tuple[float | None, float | None, float | None]],
    batch: str = "b",
    tag: str = "",
) -> pa.Table:
    rows = []
    for i, score in enumerate(scores):
        mean, spread, *rest = score
        messages = [{"role": "user", "content": f"{tag}q{i}"}, {"role": "assistant", "content": f"a{i}"}]
        rows.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": batch,
                "kind": "sft",
                "messages": messages,
                "scores": {
                    "judge_mean": mean,
                    "judge_spread": spread,
                    "judge_confidence": rest[0] if rest else None,
                },
                "decisions": [],
            }
        )
    return from_records(rows)


def _last(table: pa.Table) -> list[tuple[str, str]]:
    return [(r["decisions"][-1]["verdict"], r["decisions"][-1]["reason"]) for r in table.to_pylist()]


def test_thresholds() -> None:
    table, counts = route(
        _table([(9, 1), (8, 5), (2, 1), (5, 2), (None, None)]), RoutingConfig(review_budget=10, **NO_AUDIT)
    )
    reasons = [r["decisions"][-1]["reason"] for r in table.to_pylist()]
    assert reasons == ["auto_accept", "needs_review", "auto_reject", "needs_review", "needs_review"]
    assert counts == {"auto_accept": 1, "needs_review": 3, "auto_reject": 1}
    verdicts = [r["decisions"][-1]["verdict"] for r in table.to_pylist()]
    assert verdicts == ["accept", "route", "reject", "route", "route"]


def test_review_budget_takes_the_biggest_disagreements_and_the_rest_wait() -> None:
    spreads = [1.0, 6.0, 3.0, 8.0, 2.0, 5.0]
    table, counts = route(_table([(5.0, s) for s in spreads]), RoutingConfig(review_budget=3, **NO_AUDIT))
    rows = table.to_pylist()
    routed = [s for s, r in zip(spreads, rows, strict=True) if r["decisions"][-1]["reason"] == "needs_review"]
    assert sorted(routed) == [5.0, 6.0, 8.0]
    waiting = [r for r in rows if r["decisions"][-1]["reason"] == "waiting"]
    assert len(waiting) == 3 and all(r["decisions"][-1]["verdict"] == "wait" for r in waiting)
    assert "budget of 3 used" in waiting[0]["decisions"][-1]["detail"]
    assert counts == {"needs_review": 3, "waiting": 3}
    assert table.num_rows == 6  # nothing dropped


def test_uncertainty_adds_the_judges_lack_of_confidence_to_the_spread() -> None:
    assert uncertainty({"judge_mean": 5.0, "judge_spread": 2.0, "judge_confidence": 1.0}) == 2.0
    assert (
        uncertainty({"judge_mean": 5.0, "judge_spread": 2.0, "judge_confidence": 0.0})
        == 2.0 + CONFIDENCE_WEIGHT
    )
    # no confidence known: halfway
    assert uncertainty({"judge_mean": 5.0, "judge_spread": 2.0}) == 2.0 + CONFIDENCE_WEIGHT / 2
    assert uncertainty({"judge_mean": None}) == float("inf")
    # spread 2 with unsure judges (4.7) > spread 3 of unknown confidence (4.5) > spread 4 of sure judges (4.3)
    table = _table([(5.0, 4.0, 0.9), (5.0, 2.0, 0.1), (5.0, 3.0, None), (5.0, 0.0, 1.0)])
    order = []
    for budget in range(1, 5):
        routed, _ = route(table, RoutingConfig(review_budget=budget, **NO_AUDIT))
        new = [i for i, (v, _) in enumerate(_last(routed)) if v == "route" and i not in order]
        order.extend(new)
    assert order == [1, 2, 0, 3]
    routed, _ = route(table, RoutingConfig(review_budget=1, **NO_AUDIT))
    assert (
        "uncertainty 4.70 (spread 2.00, confidence 0.10)" in routed.to_pylist()[1]["decisions"][-1]["detail"]
    )


def test_rows_dropped_upstream_are_not_routed() -> None:
    table = _table([(9, 0), (9, 0)])
    trail = table.column("decisions").to_pylist()
    trail[1] = [{"stage": "dedup", "verdict": "drop", "reason": "near_duplicate", "detail": None}]
    table = table.set_column(
        table.schema.get_field_index("decisions"),
        "decisions",
        pa.array(trail, table.schema.field("decisions").type),
    )
    routed, counts = route(table, RoutingConfig(**NO_AUDIT))
    assert counts == {"auto_accept": 1}
    assert routed.to_pylist()[1]["decisions"][-1]["stage"] == "dedup"


def test_waiting_rows_take_a_later_batchs_budget_most_uncertain_then_oldest_first() -> None:
    config = RoutingConfig(review_budget=2, **NO_AUDIT)
    # b1: four disputed rows, two slots: spreads 6 and 5 go, 4 and 2 wait
    b1, counts1 = route(_table([(5.0, 6.0), (5.0, 4.0), (5.0, 5.0), (5.0, 2.0)], "b1", "one "), config)
    assert counts1 == {"needs_review": 2, "waiting": 2}
    # b2: a row as uncertain as b1's waiting spread-4 row, and a calm one
    b2, counts2 = route(
        _table([(5.0, 4.0), (5.0, 1.0), (9.0, 0.0)], "b2", "two "), config, earlier=b1, order=["b1"]
    )
    # counts are of the decisions made here: b1's spread-2 row lost again and keeps its b1 copy
    assert counts2 == {"needs_review": 2, "waiting": 1, "auto_accept": 1}
    rows = b2.to_pylist()
    assert [r["batch"] for r in rows] == ["b2", "b2", "b2", "b1"]  # one b1 row copied in, batch kept
    b1_rows = b1.to_pylist()
    promoted = rows[3]
    assert promoted["sample_id"] == b1_rows[1]["sample_id"]  # spread 4, older than b2's spread 4: first
    last = promoted["decisions"][-1]
    assert (last["verdict"], last["reason"]) == ("route", "needs_review")
    assert "review slot of batch b2, waiting since b1" in last["detail"]
    assert promoted["decisions"][:-1] == b1_rows[1]["decisions"]  # its trail, one decision longer
    assert _last(b2)[:2] == [("route", "needs_review"), ("wait", "waiting")]
    assert b2.column("sample_id").to_pylist() == list(dict.fromkeys(b2.column("sample_id").to_pylist()))

    # every batch together: each row once, newest copy, none lost
    both = latest_copies(pa.concat_tables([b1, b2]))
    assert both.num_rows == b1.num_rows + 3
    state = {
        (r["batch"], r["messages"][0]["content"]): r["decisions"][-1]["verdict"] for r in both.to_pylist()
    }
    assert state == {
        ("b1", "one q0"): "route",
        ("b1", "one q1"): "route",  # promoted by b2
        ("b1", "one q2"): "route",
        ("b1", "one q3"): "wait",  # least uncertain: still waiting
        ("b2", "two q0"): "route",
        ("b2", "two q1"): "wait",
        ("b2", "two q2"): "accept",
    }

    # b3, no rows of its own and one slot: the more uncertain waiting row (b1's spread 2) gets it
    history = pa.concat_tables([b1, b2])
    one = RoutingConfig(review_budget=1, **NO_AUDIT)
    b3, counts3 = route(_table([], "b3"), one, batch="b3", earlier=history, order=["b1", "b2"])
    assert counts3 == {"needs_review": 1}
    assert [(r["batch"], r["messages"][0]["content"]) for r in b3.to_pylist()] == [("b1", "one q3")]
    # a rerun of b3 decides the same
    again, _ = route(_table([], "b3"), one, batch="b3", earlier=history, order=["b1", "b2"])
    assert again.to_pylist() == b3.to_pylist()


def test_a_row_that_waited_max_wait_batches_gets_the_silent_verdict() -> None:
    def run(silent: str) -> dict[str, tuple[str, str, str]]:
        config = RoutingConfig(review_budget=0, max_wait_batches=2, silent=silent, **NO_AUDIT)
        b1, _ = route(_table([(5.0, 4.0)], "b1", "one "), config)
        b2, counts2 = route(_table([], "b2"), config, batch="b2", earlier=b1, order=["b1"])
        assert counts2 == {} and b2.num_rows == 0  # waited one later batch: still waiting
        b3, counts3 = route(
            _table([], "b3"), config, batch="b3", earlier=pa.concat_tables([b1, b2]), order=["b1", "b2"]
        )
        assert counts3 == {"waited_too_long": 1}
        last = b3.to_pylist()[0]["decisions"][-1]
        return {silent: (last["verdict"], last["reason"], last["detail"])}

    review = run("review")["review"]
    assert review[:2] == ("route", "waited_too_long")
    assert "no review slot in batches b2, b3" in review[2] and "routed over budget" in review[2]
    assert run("accept")["accept"][:2] == ("accept", "waited_too_long")
    assert run("reject")["reject"][:2] == ("reject", "waited_too_long")


def test_audit_sends_a_seeded_share_of_auto_verdicts_to_review_on_its_own_budget() -> None:
    scores = [(9.0, 0.0)] * 300 + [(1.0, 0.0)] * 300 + [(5.0, 5.0)] * 5
    table = _table(scores)
    config = RoutingConfig(review_budget=2, audit_rate=0.05, audit_budget=4)
    routed, counts = route(table, config)
    assert counts["audit"] == 4  # ~30 drawn, the audit budget takes 4
    assert counts["needs_review"] == 2 and counts["waiting"] == 3  # the review budget is untouched
    rows = routed.to_pylist()
    audited = [r for r in rows if r["decisions"][-1]["reason"] == "audit"]
    assert all(r["decisions"][-1]["verdict"] == "route" for r in audited)
    assert all(audit_draw(r["sample_id"]) < 0.05 for r in audited)
    kinds = {audited_verdict(r["decisions"]) for r in audited}
    assert kinds <= {"auto_accept", "auto_reject"}
    assert all(r["decisions"][-1]["detail"].startswith("audit of auto_") for r in audited)
    # an audited auto-reject is live until the expert decides
    assert len(live_rows(routed)) == len(rows) - counts["auto_reject"]
    # the same rows on a rerun
    again, _ = route(table, config)
    assert again.to_pylist() == rows
    _, counts0 = route(table, RoutingConfig(review_budget=2, audit_rate=0.05, audit_budget=0))
    assert "audit" not in counts0
