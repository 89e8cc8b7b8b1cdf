"""Step rewards of a trajectory: outcome, progress from test counts, penalties (pure logic).

Progress is the share of the tests failing at the start that pass after a step: with 3 failing
tests, a step that fixes one scores +1/3 (and one that breaks it again -1/3). Penalties: an
unparsable reply, an invalid call (unknown tool, bad arguments), a policy violation, a call
identical to the one before it. The final step also gets the outcome (solved or not).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["RewardWeights", "parse_test_counts", "step_rewards"]

_PYTEST = re.compile(r"=+ (.*?) in [\d.]+s")
_PYTEST_PART = re.compile(r"(\d+) (passed|failed|error|errors|xfailed|xpassed|skipped)\b")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in", re.M)
_UNITTEST_FAILED = re.compile(r"^FAILED \((.*)\)\s*$", re.M)
_UNITTEST_PART = re.compile(r"(failures|errors|unexpected successes)=(\d+)")


def parse_test_counts(output: str) -> tuple[int, int] | None:
    """(passed, total) from a pytest or unittest summary in ``output``; None if it has none.

    A test file that does not even import (a syntax error) reports an error: 0 of 1 passed.
    """
    pytest_lines = _PYTEST.findall(output)
    if pytest_lines:
        counts: dict[str, int] = {}
        for number, word in _PYTEST_PART.findall(pytest_lines[-1]):
            counts[word.rstrip("s") if word == "errors" else word] = int(number)
        passed = counts.get("passed", 0) + counts.get("xfailed", 0)
        total = passed + counts.get("failed", 0) + counts.get("error", 0) + counts.get("xpassed", 0)
        if total:
            return passed, total
    ran = _UNITTEST_RAN.findall(output)
    if ran:
        total = int(ran[-1])
        failed = 0
        if match := _UNITTEST_FAILED.findall(output):
            failed = sum(int(n) for _, n in _UNITTEST_PART.findall(match[-1]))
        return max(total - failed, 0), total
    return None


@dataclass(frozen=True)
class RewardWeights:
    solved: float = 1.0
    unsolved: float = 0.0
    progress: float = 1.0  # times the change in the share of initially failing tests now passing
    unparsable: float = -0.2
    invalid: float = -0.1
    policy_violation: float = -0.2
    repeated: float = -0.05


def step_rewards(
    steps: Sequence[dict[str, Any]],
    solved: bool,
    initial: tuple[int, int] | None,
    weights: RewardWeights | None = None,
) -> list[float]:
    """One reward per step. A step dict has ``kind`` (tool | final | unparsable | invalid |
    policy_violation), ``call`` (name and arguments, or None) and ``tests_passed`` /
    ``tests_total`` where the check ran after it. ``initial`` is (passed, total) before step 0."""
    weights = weights or RewardWeights()
    rewards: list[float] = []
    base_passed = initial[0] if initial else None
    previous_share = 0.0
    previous_call: Any = None
    for step in steps:
        reward = 0.0
        kind = step.get("kind")
        if kind == "unparsable":
            reward += weights.unparsable
        elif kind == "invalid":
            reward += weights.invalid
        elif kind == "policy_violation":
            reward += weights.policy_violation
        call = step.get("call")
        if call is not None and call == previous_call:
            reward += weights.repeated
        previous_call = call
        passed, total = step.get("tests_passed"), step.get("tests_total")
        if passed is not None and total:
            if base_passed is None:
                base_passed = 0
            failing = total - base_passed
            share = (passed - base_passed) / failing if failing > 0 else 0.0
            reward += weights.progress * (share - previous_share)
            previous_share = share
        rewards.append(round(reward, 6))
    if rewards:
        rewards[-1] = round(rewards[-1] + (weights.solved if solved else weights.unsolved), 6)
    return rewards
