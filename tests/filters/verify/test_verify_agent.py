"""The agent verifier in the real Docker sandbox: an episode's final workspace is rebuilt in a fresh
container and the task's check re-run; a failing episode is a final fail with the check's output as
evidence, the reference episode passes, and a row whose record lies about its outcome does not pass."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.episode import EpisodePool
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.verify import AgentVerifier
from ptfactory.generators.agent.reference import ReferenceEngine
from ptfactory.generators.agent.rollout import RolloutConfig, run_rollouts
from ptfactory.generators.agent.tasks import read_tasks

pytestmark = pytest.mark.integration
TASK = next(
    t for t in read_tasks(Path(__file__).resolve().parents[3] / "demo" / "agent" / "tasks.jsonl")
    if t.id == "fix-failing-test"
)  # fmt: skip
# calc.py's bug (mean divides by len + 1), "fixed" the wrong way: the tests still fail
WRONG_FIX = TASK.files["calc.py"].replace("(len(values) + 1)", "(len(values) - 1 or 1)")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    with DockerSandbox(Limits(timeout_s=10), workers=2) as box:
        yield box


@pytest.fixture(scope="module")
def episodes(sandbox: DockerSandbox) -> list[dict[str, Any]]:
    """Two trajectories through the real rollout loop: the reference solution, and a wrong fix."""
    wrong = dataclasses.replace(
        TASK,
        instruction=TASK.instruction + " (wrong)",
        solution=[{"name": "write_file", "arguments": {"path": "calc.py", "content": WRONG_FIX}}],
    )
    engine = ReferenceEngine([TASK, wrong])
    rows = run_rollouts([TASK, wrong], engine, EpisodePool(sandbox), RolloutConfig(rollouts=1, max_steps=5))
    assert [r["outcome"]["solved"] for r in rows] == [True, False]
    return rows


def test_a_failing_episode_fails(sandbox: DockerSandbox, episodes: list[dict[str, Any]]) -> None:
    passing, failing = AgentVerifier(sandbox).verify_many(episodes)
    assert (failing.verdict, failing.reason, failing.score, failing.final) == (
        "fail",
        "check_failed",
        0.0,
        True,
    )
    assert failing.evidence["recorded_solved"] is False
    assert "FAILED" in failing.evidence["output_tail"]  # the agent check's own output
    assert failing.evidence["check"] == TASK.check and failing.evidence["workspace_reproduced"]
    assert (passing.verdict, passing.reason, passing.score) == ("pass", "check_passed", 1.0)
    assert passing.evidence["steps_replayed"] >= 1


def test_a_record_claiming_success_does_not_pass(
    sandbox: DockerSandbox, episodes: list[dict[str, Any]]
) -> None:
    lying = json.loads(json.dumps(episodes[1]))
    lying["outcome"]["solved"] = True  # the recorded outcome says solved; the final state says not
    verdict = AgentVerifier(sandbox).verify(lying)
    assert (verdict.verdict, verdict.reason) == ("fail", "check_failed")


def test_rows_that_are_not_episodes_do_not_apply(sandbox: DockerSandbox) -> None:
    plain = {
        "kind": "sft",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    }
    assert AgentVerifier(sandbox).verify(plain).reason == "not_applicable"
