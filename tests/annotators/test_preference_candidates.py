"""Preference candidates: an instruction's best and worst answers become a pair that every LLM judge
compares in both orders; routing accepts a pair the comparisons confirm, sends a contradicted or
order-dependent one to the expert A/B queue (never rejects it unseen), and the A/B task is pre-filled
with each judge's position-swapped verdict (nothing from a judge that flipped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ptfactory.annotators.judges import LLMJudge
from ptfactory.annotators.judges.pairwise import preference_candidates
from ptfactory.annotators.labelstudio.tasks import queue_of, to_task
from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.storage.schema import from_records, sample_id
from tests.annotators.test_llm_votes import _FAMILIES, _bundled_judge
from tests.annotators.test_pairwise import Letters  # prefers the response that says GOOD


def _answer(parent: str, text: str, mean: float) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"question {parent}"}, {"role": "assistant", "content": text}]
    return {
        "sample_id": sample_id("sft", messages),
        "batch": "b1",
        "kind": "sft",
        "messages": messages,
        "provenance": {"method": "response", "parent_id": parent},
        "scores": {"judge_mean": mean, "judge_spread": 0.5},
        "decisions": [{"stage": "judge", "verdict": "keep", "reason": "scored", "detail": None}],
    }


ROWS = [
    _answer("p1", "GOOD answer", 8.0),
    _answer("p1", "weak answer", 3.0),
    _answer("p2", "GOOD too", 6.0),  # a gap under the margin: no pair
    _answer("p2", "meh", 5.5),
    _answer("p3", "scored high", 9.0),  # the judges' comparison contradicts the scores
    _answer("p3", "GOOD but scored low", 4.0),
]


def test_candidates_are_compared_in_both_orders_and_routed_by_the_comparison() -> None:
    """Two judges of different families that earned a weight: two independent votes, enough to
    accept a pair their comparisons confirm."""
    fair = LLMJudge("fair", engine=Letters(model_id="fair"), family="one")
    other = LLMJudge("other", engine=Letters(model_id="other"), family="two")
    report = preference_candidates(ROWS, [fair, other], margin=2.0, weights={"fair": 0.8, "other": 0.6})
    assert report.consistency == {"fair": 1.0, "other": 1.0}
    assert report.agreement["fair"] == (0.5, 2)  # agrees with the score gap on p1, not on p3
    pairs = {r["provenance"]["parent_id"]: r for r in report.rows}
    assert set(pairs) == {ROWS[0]["sample_id"], ROWS[4]["sample_id"]}  # the pair's parent: the chosen row
    confirmed, contradicted = pairs[ROWS[0]["sample_id"]], pairs[ROWS[4]["sample_id"]]
    assert confirmed["kind"] == "preference"
    assert confirmed["chosen"][0]["content"] == "GOOD answer"
    assert confirmed["rejected"][0]["content"] == "weak answer"
    assert [(m["role"], m["content"]) for m in confirmed["messages"]] == [("user", "question p1")]
    vote, _ = confirmed["scores"]["judges"]
    assert (vote["verdict"], vote["method"], vote["score"], vote["confidence"]) == ("A", "pairwise", 9.1, 0.8)
    assert confirmed["scores"]["judge_votes"] == 2
    vote, _ = contradicted["scores"]["judges"]
    assert (vote["verdict"], vote["score"]) == ("B", 1.9)

    routed, counts = route(from_records(report.rows), RoutingConfig(audit_rate=0.0))
    last = {r["sample_id"]: r["decisions"][-1] for r in routed.to_pylist()}
    assert last[confirmed["sample_id"]]["reason"] == "auto_accept"
    # a low score on a pair is a contradiction, not a bad answer: an expert settles it
    assert (last[contradicted["sample_id"]]["verdict"], last[contradicted["sample_id"]]["reason"]) == (
        "route",
        "needs_review",
    )
    assert counts == {"auto_accept": 1, "needs_review": 1}

    task = to_task(contradicted, accept_at=7.0)
    assert queue_of(contradicted) == "preference"
    assert (task["data"]["response_a"], task["data"]["response_b"]) == ("scored high", "GOOD but scored low")
    assert [p["result"][0]["value"] for p in task["predictions"]] == [{"choices": ["B"]}] * 2
    assert "fair (fair): prefers B" in task["data"]["judges"]
    # the same comparisons from judges nothing measured: no vote counts, an expert decides
    unmeasured = preference_candidates(ROWS[:2], [fair, other], margin=2.0).rows
    assert unmeasured[0]["scores"]["judge_votes"] == 0
    assert route(from_records(unmeasured), RoutingConfig(audit_rate=0.0))[1] == {"needs_review": 1}


def test_a_judge_that_follows_the_position_abstains_and_prefills_nothing() -> None:
    fair = LLMJudge("fair", engine=Letters(model_id="fair"))
    biased = LLMJudge("biased", engine=Letters(model_id="biased", biased=True))
    report = preference_candidates(ROWS[:2], [fair, biased], margin=2.0)
    assert report.consistency == {"fair": 1.0, "biased": 0.0}
    (row,) = report.rows
    votes = {v["judge"]: v for v in row["scores"]["judges"]}
    assert votes["biased"]["verdict"] == "abstain" and votes["biased"]["score"] is None
    assert row["scores"]["judge_mean"] == votes["fair"]["score"]  # the abstention does not count
    assert row["scores"]["judge_votes"] == 0  # nothing measured them: ranks, decides nothing
    task = to_task(row, accept_at=7.0)
    assert [p["model_version"] for p in task["predictions"]] == ["fair"]
    assert "biased (biased): abstains" in task["data"]["judges"]

    only_biased = preference_candidates(ROWS[:2], [biased], margin=2.0).rows
    routed, counts = route(from_records(only_biased), RoutingConfig(audit_rate=0.0))
    assert counts == {"needs_review": 1}  # no judge could tell: a human decides
    assert to_task(routed.to_pylist()[0])["predictions"] == []


def test_no_pair_without_a_wide_enough_gap() -> None:
    fair = LLMJudge("fair", engine=Letters(model_id="fair"))
    assert preference_candidates(ROWS[2:4], [fair], margin=2.0).rows == []
    tied = [_answer("p9", "GOOD", 5.0), _answer("p9", "same score", 5.0)]
    assert preference_candidates(tied, [fair], margin=0.0).rows == []


@pytest.mark.slow
@_FAMILIES
def test_real_judges_compare_real_pairs_in_both_orders(model: str, style: str, smollm2: Path) -> None:
    """The bundled models through the real engine: every candidate gets one pairwise vote per judge,
    read from the letters' probabilities in both orders (a verdict, or an abstention on a flip)."""
    judge, pairs = _bundled_judge(model, style, "likelihood")
    rows = []
    for i, row in enumerate(pairs):
        # good answers scored 8, bad ones 3: each question's two answers are a candidate
        parent = str(row["messages"][0]["content"])  # type: ignore[index]
        rows.append(
            {
                **row,
                "batch": "b",
                "provenance": {"parent_id": parent},
                "decisions": [],
                "scores": {"judge_mean": 8.0 if i % 2 == 0 else 3.0},
            }
        )
    report = preference_candidates(rows, [judge], margin=2.0)
    assert len(report.rows) == len(pairs) // 2
    consistency = report.consistency[judge.name]
    assert consistency is not None and 0.0 <= consistency <= 1.0
    for row in report.rows:
        (vote,) = row["scores"]["judges"]
        assert vote["method"] == "pairwise" and vote["verdict"] in ("A", "B", "abstain")
        if vote["verdict"] == "abstain":
            assert vote["score"] is None and "flipped" in vote["rationale"]
        else:
            assert 1.0 <= vote["score"] <= 10.0 and 0.0 <= vote["confidence"] <= 1.0
            assert (vote["verdict"] == "A") == (vote["score"] > 5.5)
    decided = sum(r["scores"]["judges"][0]["verdict"] != "abstain" for r in report.rows)
    assert decided == round(consistency * len(report.rows))
    routed, _ = route(from_records(report.rows), RoutingConfig(audit_rate=0.0))
    assert routed.num_rows == len(report.rows)


def test_a_pair_the_sandbox_vouches_for_is_not_judged_and_is_accepted_as_verified() -> None:
    from ptfactory.annotators.judges.panel import judged_rows

    prompt = [{"role": "user", "content": "fix the test"}]
    solved, failed = (
        [{"role": "assistant", "content": "fixed"}],
        [{"role": "assistant", "content": "gave up"}],
    )
    agent_pair = {
        "sample_id": sample_id("preference", prompt, chosen=solved, rejected=failed),
        "batch": "b1",
        "kind": "preference",
        "messages": prompt,
        "chosen": solved,
        "rejected": failed,
        "provenance": {"method": "agent_rollout"},
        "decisions": [
            {"stage": "agent_pairs", "verdict": "keep", "reason": "solved_over_failed", "detail": None}
        ],
    }
    biased = LLMJudge("biased", engine=Letters(model_id="biased", biased=True))
    undecided = preference_candidates(ROWS[:2], [biased], margin=2.0).rows  # every judge abstained
    table = from_records([agent_pair, *undecided, ROWS[0]])
    assert judged_rows(table) == [2]  # pairs get no pointwise vote: only the sft answer
    routed, counts = route(table.slice(0, 2), RoutingConfig(audit_rate=1.0))
    last = [r["decisions"][-1] for r in routed.to_pylist()]
    assert (last[0]["verdict"], last[0]["reason"]) == ("accept", "verified_pair")  # never audited
    assert (last[1]["verdict"], last[1]["reason"]) == ("route", "needs_review")  # compared, undecided
    assert counts == {"verified_pair": 1, "needs_review": 1}
