"""The report's statistics against their definitions: pass@k by counting subsets, Wilson by its
formula's known values, the bootstrap's coverage of a fixed mean, stability at K = 1 and K >= 2."""

from __future__ import annotations

import itertools
import math

import pytest

from ptfactory.training.eval.metrics import bootstrap, pass_at_k, stability, wilson
from ptfactory.training.eval.report import summarize


@pytest.mark.parametrize(
    ("n", "c", "k"), [(5, 0, 1), (5, 1, 1), (5, 2, 3), (10, 3, 5), (8, 8, 2), (20, 1, 20)]
)
def test_pass_at_k_is_the_share_of_k_subsets_holding_a_correct_rollout(n: int, c: int, k: int) -> None:
    rollouts = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    exact = sum(any(rollouts[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


def test_pass_at_k_needs_k_rollouts() -> None:
    with pytest.raises(ValueError, match="sample at least k"):
        pass_at_k(2, 1, 3)


def test_pass_at_k_stays_finite_at_large_n() -> None:
    # the product form: no factorials of 1,000 overflowing
    assert 0.0 < pass_at_k(1000, 3, 10) < 1.0
    assert not math.isnan(pass_at_k(1000, 3, 10))


def test_wilson_interval() -> None:
    low, high = wilson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)  # the textbook value at z = 1.96
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 10)[1] > 0.0  # never [0, 0] for a finite sample
    assert wilson(10, 10)[1] == pytest.approx(1.0) and wilson(10, 10)[0] < 1.0


def test_bootstrap_interval_holds_the_mean_and_narrows_with_tasks() -> None:
    few = [1.0, 0.0] * 10
    many = [1.0, 0.0] * 200
    low, high = bootstrap(few, seed=1)
    assert low < 0.5 < high
    low2, high2 = bootstrap(many, seed=1)
    assert (high2 - low2) < (high - low) / 3
    assert bootstrap([1.0] * 7) == (1.0, 1.0)


def test_stability_is_undefined_at_one_rollout() -> None:
    assert stability([[True], [False]]) is None
    assert stability([[True, True], [False, False], [True, False], [False, True]]) == 0.5


def _record(task: str, success: bool, verdict: str = "pass", **extra: object) -> dict[str, object]:
    return {"task_id": task, "success": success, "verdict": verdict if success else "fail", **extra}


def test_summary_fields() -> None:
    records = [
        _record("a", True),
        _record("a", True),
        _record("b", True),
        _record("b", False),
        {**_record("c", False), "verdict": "no_answer"},
        {**_record("c", False), "violations": {"network": 1}, "timeouts": 1},
    ]
    s = summarize(records)
    assert (s["tasks"], s["rollouts"], s["rollouts_per_task"]) == (3, 6, 2)
    assert s["success_rate"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert s["pass_at_k"] == {"1": pytest.approx(0.5), "2": pytest.approx(2 / 3)}
    assert s["stability"] == pytest.approx(2 / 3)
    assert s["no_answer"] == {"count": 1, "rate": pytest.approx(1 / 6)}
    assert s["safety"]["violations"] == 1 and s["safety"]["by_category"]["network"] == 1
    assert s["safety"]["timeouts"] == 1
    assert "wilson95" not in s  # two rollouts a task: the bootstrap over tasks only
    assert summarize([_record("a", True), _record("b", False)])["wilson95"] == list(wilson(1, 2))
