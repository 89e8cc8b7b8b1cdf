from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from ptfactory.annotators.review_queue import ReviewQueue
from ptfactory.annotators.routing import CONFIDENCE_WEIGHT, RoutingConfig, audit_draw, route, uncertainty
from ptfactory.storage.schema import audited_verdict, from_records, live_rows, sample_id

NO_AUDIT = {"audit_rate": 0.0}


def _table(
    scores: Iterable[tuple[float | None, float | None] | tuple[float | None, float | None, float | None]],
    batch: str = "b",
    tag: str = "",
    votes: int = 2,
    verifiers: list[list[str]] | None = None,
) -> pa.Table:
    """Rows with these (mean, spread[, confidence]); ``votes`` independent counted votes each (two:
    enough to decide); ``verifiers``: per row, the verdicts of its verifiers."""
    rows = []
    for i, score in enumerate(scores):
        mean, spread, *rest = score
        said = verifiers[i] if verifiers else []
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
                    "judge_votes": votes,
                    "verifiers": [_verdict(f"v{k}", v) for k, v in enumerate(said)] or None,
                },
                "decisions": [],
            }
        )
    return from_records(rows)


def _verdict(name: str, verdict: str) -> dict[str, object]:
    score = {"pass": 1.0, "abstain": None}.get(verdict, 0.0)
    return {
        "verifier": name,
        "kind": "answer",
        "verdict": verdict,
        "reason": "wrong_answer" if verdict == "fail" else verdict,
        "score": score,
        "partial": None,
        "final": verdict == "fail",
        "evidence": "{}",
    }


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


def test_uncertainty_adds_a_stated_lack_of_confidence_and_invents_none() -> None:
    assert uncertainty({"judge_mean": 5.0, "judge_spread": 2.0, "judge_confidence": 1.0}) == 2.0
    assert (
        uncertainty({"judge_mean": 5.0, "judge_spread": 2.0, "judge_confidence": 0.0})
        == 2.0 + CONFIDENCE_WEIGHT
    )
    # no confidence stated (likelihood, embedding, verifier votes): the term is dropped, not guessed
    assert uncertainty({"judge_mean": 5.0, "judge_spread": 2.0}) == 2.0
    assert uncertainty({"judge_mean": None}) == float("inf")
    # spread 2 with unsure judges (4.7) > spread 4 of sure judges (4.3) > spread 3, none stated (3.0)
    table = _table([(5.0, 4.0, 0.9), (5.0, 2.0, 0.1), (5.0, 3.0, None), (5.0, 0.0, 1.0)])
    order = []
    for budget in range(1, 5):
        routed, _ = route(table, RoutingConfig(review_budget=budget, **NO_AUDIT))
        new = [i for i, (v, _) in enumerate(_last(routed)) if v == "route" and i not in order]
        order.extend(new)
    assert order == [1, 0, 2, 3]
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


def _state(queue: ReviewQueue) -> dict[tuple[str, str], tuple[str, str | None]]:
    """(batch, prompt) -> (queue state, slot) of every row in the review queue."""
    held = queue.records(r.sample_id for r in queue.pending()).to_pylist()
    waiting = queue.changes(0).rows.to_pylist()
    slots = {p.sample_id: p.slot for p in queue.pending()}
    out = {}
    for row in {r["sample_id"]: r for r in [*waiting, *held]}.values():
        verdict = row["decisions"][-1]["verdict"]
        out[(row["batch"], row["messages"][0]["content"])] = (verdict, slots.get(row["sample_id"]))
    return out


def test_waiting_rows_take_a_later_batchs_budget_most_uncertain_then_oldest_first(tmp_path: Path) -> None:
    queue = ReviewQueue(tmp_path / "queue.sqlite")
    config = RoutingConfig(review_budget=2, **NO_AUDIT)
    # b1: four disputed rows, two slots: spreads 6 and 5 go, 4 and 2 wait in the queue
    b1 = queue.admit("b1", _table([(5.0, 6.0), (5.0, 4.0), (5.0, 5.0), (5.0, 2.0)], "b1", "one "), config)
    assert b1.counts == {"needs_review": 2, "waiting": 2} and b1.promoted == 0
    # b2: a row as uncertain as b1's waiting spread-4 row, and a calm one
    b2 = queue.admit("b2", _table([(5.0, 4.0), (5.0, 1.0), (9.0, 0.0)], "b2", "two "), config)
    # counts are of the decisions made here: b1's spread-2 row lost again and keeps waiting
    assert b2.counts == {"needs_review": 2, "waiting": 1, "auto_accept": 1} and b2.promoted == 1
    assert [r["batch"] for r in b2.table.to_pylist()] == ["b2", "b2", "b2"]  # b2's rows only
    assert _last(b2.table) == [("route", "needs_review"), ("wait", "waiting"), ("accept", "auto_accept")]
    b1_rows = b1.table.to_pylist()
    (promoted,) = queue.records([b1_rows[1]["sample_id"]]).to_pylist()  # spread 4, older than b2's: first
    last = promoted["decisions"][-1]
    assert (last["verdict"], last["reason"]) == ("route", "needs_review")
    assert "review slot of batch b2, waiting since b1" in last["detail"]
    assert promoted["decisions"][:-1] == b1_rows[1]["decisions"]  # its trail, one decision longer

    # the queue: every row that needs a human once, its state and the budget that gave it a slot
    assert _state(queue) == {
        ("b1", "one q0"): ("route", "b1"),
        ("b1", "one q1"): ("route", "b2"),  # promoted by b2
        ("b1", "one q2"): ("route", "b1"),
        ("b1", "one q3"): ("wait", None),  # least uncertain: still waiting
        ("b2", "two q0"): ("route", "b2"),
        ("b2", "two q1"): ("wait", None),
    }
    # b3, no rows of its own and one slot: the more uncertain waiting row (b1's spread 2) gets it
    one = RoutingConfig(review_budget=1, **NO_AUDIT)
    b3 = queue.admit("b3", _table([], "b3"), one)
    assert b3.counts == {"needs_review": 1} and b3.promoted == 1 and b3.table.num_rows == 0
    assert _state(queue)[("b1", "one q3")] == ("route", "b3")
    # a rerun of b3 decides nothing new (and says what it decided): its slot is spent, b2's row waits
    again = queue.admit("b3", _table([], "b3"), one)
    assert again.counts == {"needs_review": 1} and again.promoted == 1
    assert _state(queue)[("b2", "two q1")] == ("wait", None)


def test_a_row_that_waited_max_wait_batches_gets_the_silent_verdict(tmp_path: Path) -> None:
    def run(silent: str) -> tuple[str, str, str]:
        queue = ReviewQueue(tmp_path / f"{silent}.sqlite")
        config = RoutingConfig(review_budget=0, max_wait_batches=2, silent=silent, **NO_AUDIT)
        queue.admit("b1", _table([(5.0, 4.0)], "b1", "one "), config)
        b2 = queue.admit("b2", _table([], "b2"), config)
        assert b2.counts == {} and b2.table.num_rows == 0  # waited one later batch: still waiting
        assert queue.counts() == {"waiting": 1}
        b3 = queue.admit("b3", _table([], "b3"), config)
        assert b3.counts == {"waited_too_long": 1}
        (row,) = queue.changes(0).rows.to_pylist()
        assert queue.counts() == ({"review": 1} if silent == "review" else {"settled": 1})
        last = row["decisions"][-1]
        return last["verdict"], last["reason"], last["detail"]

    review = run("review")
    assert review[:2] == ("route", "waited_too_long")
    assert "no review slot in batches b2, b3" in review[2] and "routed over budget" in review[2]
    assert run("accept")[:2] == ("accept", "waited_too_long")
    assert run("reject")[:2] == ("reject", "waited_too_long")


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
    # the probability each was drawn with (calibration divides by it): 4 of 600 automatic verdicts
    assert all("drawn with p=0.0067;" in r["decisions"][-1]["detail"] for r in audited)
    # an audited auto-reject is live until the expert decides
    assert len(live_rows(routed)) == len(rows) - counts["auto_reject"]
    # the same rows on a rerun
    again, _ = route(table, config)
    assert again.to_pylist() == rows
    _, counts0 = route(table, RoutingConfig(review_budget=2, audit_rate=0.05, audit_budget=0))
    assert "audit" not in counts0


def test_a_demo_sized_batch_gets_audit_rows_but_no_verified_row_is_audited() -> None:
    """A few dozen rows at a 5 % rate would draw none: ``audit_min`` draws two; a row a verifier
    decided is a label already and never audited."""
    table = _table([(9.0, 0.0)] * 10 + [(1.0, 0.0)] * 10, verifiers=[["pass"]] * 5 + [[]] * 15)
    routed, counts = route(table, RoutingConfig(review_budget=5))
    assert counts["audit"] == 2
    audited = [i for i, (_, reason) in enumerate(_last(routed)) if reason == "audit"]
    assert all(i >= 5 for i in audited)
    assert all("drawn with p=0.1333;" in routed.to_pylist()[i]["decisions"][-1]["detail"] for i in audited)


def test_a_verifier_fail_is_final_and_no_answer_goes_to_review() -> None:
    """A fail is rejected whatever the judges' mean and whatever ``silent`` says; no_answer and
    partial are never a default score: review, first in the queue."""
    table = _table(
        [(9.5, 0.0), (9.5, 0.0), (9.5, 0.0), (None, None), (5.0, 1.0)],
        verifiers=[["fail"], ["no_answer"], ["partial"], ["fail"], []],
    )
    for silent in ("review", "accept", "reject"):
        routed, _ = route(table, RoutingConfig(review_budget=2, silent=silent, **NO_AUDIT))
        last = _last(routed)
        assert last[0] == ("reject", "auto_reject") and last[3] == ("reject", "auto_reject")
        assert last[1] == ("route", "needs_review") and last[2] == ("route", "needs_review")
        assert "verifier fail (final): v0: wrong_answer" in routed.to_pylist()[0]["decisions"][-1]["detail"]


def test_one_counted_vote_decides_nothing() -> None:
    """Auto-accept (and auto-reject) need two independent counted votes: with one, or none, the row
    is silent (review by default)."""
    for votes in (0, 1):
        routed, counts = route(_table([(9.5, 0.0), (1.0, 0.0)], votes=votes), RoutingConfig(**NO_AUDIT))
        assert counts == {"needs_review": 2}
        routed, counts = route(_table([(9.5, 0.0)], votes=votes), RoutingConfig(silent="accept", **NO_AUDIT))
        assert counts == {"auto_accept": 1}
        assert "under routing.min_votes 2; routing.silent is accept" in _last_detail(routed)
    _, counts = route(_table([(9.5, 0.0), (1.0, 0.0)], votes=2), RoutingConfig(**NO_AUDIT))
    assert counts == {"auto_accept": 1, "auto_reject": 1}


def _last_detail(table: pa.Table) -> str:
    return str(table.to_pylist()[0]["decisions"][-1]["detail"])
