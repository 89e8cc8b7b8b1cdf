"""Step rewards and test-count parsing (pure logic)."""

import pytest

from ptfactory.generators.agent.rewards import RewardWeights, parse_test_counts, step_rewards

UNITTEST_FAIL = "..F\n----------------------------------------------------------------------\nRan 4 tests in 0.001s\n\nFAILED (failures=1, errors=1)\n"


def test_counts_from_unittest_and_pytest() -> None:
    assert parse_test_counts(UNITTEST_FAIL) == (2, 4)
    assert parse_test_counts("Ran 3 tests in 0.002s\n\nOK\n") == (3, 3)
    assert parse_test_counts("=========== 1 failed, 2 passed in 0.12s ===========") == (2, 3)
    assert parse_test_counts("== 2 failed, 1 passed, 1 error in 1.01s ==") == (1, 4)
    assert parse_test_counts("===== 5 passed in 0.50s =====") == (5, 5)
    assert parse_test_counts("Traceback (most recent call last): ...") is None


W = RewardWeights()


def _tool(
    passed: int | None = None, total: int | None = None, call: object = None, kind: str = "tool"
) -> dict:
    return {"kind": kind, "call": call, "tests_passed": passed, "tests_total": total}


def test_fixing_one_of_three_failing_tests_scores_a_third() -> None:
    steps = [_tool(call={"n": 1}), _tool(1, 3, call={"n": 2})]
    rewards = step_rewards(steps, solved=False, initial=(0, 3))
    assert rewards == [0.0, pytest.approx(1 / 3, abs=1e-6)]


def test_progress_counts_only_initially_failing_tests_and_can_go_back() -> None:
    steps = [_tool(2, 4, call=1), _tool(3, 4, call=2), _tool(2, 4, call=3), _tool(4, 4, call=4)]
    rewards = step_rewards(steps, solved=True, initial=(1, 4))
    assert rewards[0] == pytest.approx(1 / 3, abs=1e-6)
    assert rewards[1] == pytest.approx(1 / 3, abs=1e-6)
    assert rewards[2] == pytest.approx(-1 / 3, abs=1e-6)
    assert rewards[3] == pytest.approx(2 / 3 + W.solved, abs=1e-6)
    assert sum(rewards) == pytest.approx(1 + W.solved, abs=1e-6)


def test_penalties() -> None:
    steps = [
        _tool(kind="unparsable"),
        _tool(kind="invalid", call={"name": "nope"}),
        _tool(kind="policy_violation", call={"name": "bash", "arguments": {"command": "curl x"}}),
        _tool(kind="policy_violation", call={"name": "bash", "arguments": {"command": "curl x"}}),
    ]
    rewards = step_rewards(steps, solved=False, initial=None)
    assert rewards == [W.unparsable, W.invalid, W.policy_violation, W.policy_violation + W.repeated]


def test_outcome_on_the_last_step_and_custom_weights() -> None:
    custom = RewardWeights(solved=5.0, unsolved=-1.0)
    assert step_rewards([_tool(call=1)], solved=True, initial=None, weights=custom) == [5.0]
    assert step_rewards([_tool(call=1)], solved=False, initial=None, weights=custom) == [-1.0]
    assert step_rewards([], solved=True, initial=None) == []
