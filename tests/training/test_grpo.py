"""``ptf train grpo``: rewards are the factory's verifiers (a right completion scores 1, a wrong one
0, through the real verifier; code in the sandbox, a crash or a hang 0, never an abstention; None
where a reward does not apply); a few GRPO steps on the tiny model move its weights and record
the version, the reward config and the trainer config; ``kill -9`` mid-run and the same command
resumes from the last checkpoint."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from ptfactory.filters.execution.limits import Limits
from ptfactory.generators.procedural import draw_seed_rows
from ptfactory.generators.seeds import parse_seed
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.config import TrainConfig
from ptfactory.training.grpo import train_grpo
from ptfactory.training.rewards import (
    AnswerReward,
    CodeReward,
    FormatReward,
    ProceduralReward,
    task_column,
)
from tests.conftest import PTF


def _prompt(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _completion(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


CHAIN = parse_seed("t", draw_seed_rows(["chain_sum"], 2, seed=0)[1])  # 4 - 1 - 7 = -4
ANSWER = {"reference": {"answer": "18", "source": "answer"}}
CODE = {
    "tests": "def check(candidate):\n    assert candidate(2) == 4\n",
    "entry_point": "double",
}


def test_procedural_and_answer_rewards_through_the_real_verifiers() -> None:
    procedural = task_column({"reference": CHAIN.reference()})
    answer = task_column(ANSWER)
    prompts = [_prompt(CHAIN.prompt)] * 3 + [_prompt("Eggs?")] * 2
    completions = [
        _completion(t) for t in ("<answer>-4</answer>", "<answer>4</answer>", "no idea", "#### 18", "#### 17")
    ]
    tasks = [procedural] * 3 + [answer] * 2
    scored = ProceduralReward()
    assert scored.__name__ == "procedural_reward"
    try:
        assert scored(prompts, completions, ptf_task=tasks) == [1.0, 0.0, 0.0, None, None]
    finally:
        scored.close()
    math = AnswerReward()
    try:
        assert math(prompts, completions, ptf_task=tasks) == [None, None, None, 1.0, 0.0]
        copy = pickle.loads(pickle.dumps(math))  # TRL may pickle reward functions
        assert copy.__name__ == "answer_reward" and copy(
            prompts[3:], completions[3:], ptf_task=tasks[3:]
        ) == [1.0, 0.0]
        copy.close()
    finally:
        math.close()
    assert FormatReward()(prompts, completions, ptf_task=tasks) == [1.0, 1.0, 0.0, 1.0, 1.0]


@pytest.mark.integration
def test_code_rewards_run_in_the_sandbox_and_a_hang_scores_zero() -> None:
    reward = CodeReward(Limits(timeout_s=3, memory_mb=128, pids=32), workers=2, backend="docker")
    assert reward._sandbox is None  # built in the process that scores, on first use
    task = task_column(CODE)
    right = "```python\ndef double(x):\n    return 2 * x\n```"
    wrong = "```python\ndef double(x):\n    return x + 1\n```"
    hang = "```python\ndef double(x):\n    while True:\n        pass\n```"
    crash = "```python\nimport os\nos._exit(3)\n```"
    copy = pickle.loads(pickle.dumps(reward))
    try:
        scores = copy(
            [_prompt("double")] * 4,
            [_completion(c) for c in (right, wrong, hang, crash)],
            ptf_task=[task] * 4,
        )
        assert scores == [1.0, 0.0, 0.0, 0.0]
        assert copy([_prompt("x")], [_completion("#### 18")], ptf_task=[task_column(ANSWER)]) == [None]
    finally:
        copy.close()
    assert reward._sandbox is None


def _rl_version(home: Path) -> DatasetStore:
    """Prompts the tiny model answers in random words; a reward it earns sometimes (the words it
    writes are the tokenizer's corpus), so the group advantages are not all zero."""
    records = []
    for i, word in enumerate(["fox", "dog", "paris", "python", "sandbox", "judge", "shard", "prompt"]):
        messages = _prompt(f"Write a sentence with the word {word}. ({i})")
        records.append(
            {
                "sample_id": sample_id("rl", messages),
                "batch": "b1",
                "kind": "rl",
                "messages": messages,
                "reference": {
                    "constraints": json.dumps([{"type": "keywords:existence", "keywords": ["the"]}]),
                    "source": "constraints",
                },
                "decisions": [{"stage": "rl", "verdict": "keep", "reason": "in_band", "detail": None}],
            }
        )
    datasets = DatasetStore(str(home))
    datasets.publish("rl", from_records(records), kind="rl", config_hash="t", batches=["b1"])
    return datasets


def _weights(path: Path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return {k: v.detach().clone() for k, v in AutoModelForCausalLM.from_pretrained(path).state_dict().items()}


def test_a_few_grpo_steps_move_the_weights_and_record_the_run(
    home: Path, tiny_model: Path, tmp_path: Path
) -> None:
    datasets = _rl_version(home)
    config = TrainConfig(
        kind="grpo",
        dataset="rl@v1",
        model=str(tiny_model),
        output=str(tmp_path / "grpo"),
        max_steps=3,
        learning_rate=5e-3,
        batch_size=8,
        num_generations=4,
        max_completion_length=12,
        temperature=1.0,
    )
    result = train_grpo(config, datasets, say=lambda _: None)
    assert result.metrics["steps"] == 3
    assert [p["step"] for p in result.metrics["reward_per_step"]] == [1, 2, 3]
    before, after = _weights(tiny_model), _weights(tmp_path / "grpo")
    assert any(not torch.equal(before[k], after[k]) for k in before)
    lineage = json.loads((tmp_path / "grpo" / "ptf_lineage.json").read_text())
    assert lineage["kind"] == "grpo" and lineage["dataset"]["ref"] == "rl@v1"
    assert [f["name"] for f in lineage["rewards"]["functions"]] == ["constraints_reward", "format_reward"]
    assert lineage["rewards"]["weights"] == [1.0, 0.2]
    assert lineage["trainer"]["args"]["num_generations"] == 4
    assert datasets.catalog.query("SELECT kind FROM training_runs") == [("grpo",)]


def _command(home: Path, model: Path, output: Path) -> tuple[list[str], dict[str, str]]:
    args = [
        *PTF,
        "train",
        "grpo",
        "--dataset",
        "rl@v1",
        "--model",
        str(model),
        "--output",
        str(output),
        "--max-steps",
        "24",
        "--save-every",
        "2",
        "--batch-size",
        "4",
        "--num-generations",
        "4",
        "--max-completion-length",
        "8",
        "--learning-rate",
        "1e-3",
    ]
    env = {**os.environ, "PTF_HOME": str(home), "OMP_NUM_THREADS": "1"}
    env.pop("DAGSTER_HOME", None)
    return args, env


def test_kill_9_mid_run_and_the_same_command_resumes(home: Path, tiny_model: Path, tmp_path: Path) -> None:
    _rl_version(home)
    output = tmp_path / "run"
    args, env = _command(home, tiny_model, output)
    first = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    checkpoints = output / "checkpoints"
    try:
        while time.monotonic() < deadline and first.poll() is None:
            done = [p for p in checkpoints.glob("checkpoint-*") if (p / "trainer_state.json").is_file()]
            if any(int(p.name.split("-")[1]) >= 4 for p in done):
                break
            time.sleep(0.2)
        assert first.poll() is None, (
            "the run ended before it could be killed: " + first.stderr.read().decode()[-2000:]
        )
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.wait()
    assert not (output / "ptf_lineage.json").exists()  # killed: it never finished
    steps_done = max(int(p.name.split("-")[1]) for p in checkpoints.glob("checkpoint-*"))
    second = subprocess.run(
        args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming from checkpoint-" in second.stderr
    lineage = json.loads((output / "ptf_lineage.json").read_text())
    assert lineage["metrics"]["steps"] == 24
    resumed = int(lineage["metrics"]["resumed_from"].split("-")[1])
    assert 4 <= resumed <= steps_done
    # one history: the checkpoint's steps, then the resumed ones, each once
    assert [p["step"] for p in lineage["metrics"]["reward_per_step"]] == list(range(1, 25))
    other = subprocess.run(
        [*args[:-2], "--learning-rate", "5e-4"],
        check=False,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert other.returncode == 2 and "another run" in other.stderr  # a different run is not resumed into it
