"""``ptf eval`` as users run it: every task type on the tiny model and on the bundled one (code
graded and agent steps run in the sandbox), failures to seeds, and bad task files (one line
naming the row and the field, exit 2, nothing written)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from ptfactory.errors import SeedError, UserInputError
from ptfactory.training.eval.tasks import load_tasks

Ptf = Callable[..., CompletedProcess[str]]

AGENT = {
    "kind": "agent",
    "id": "fix-add",
    "instruction": "Make the tests pass.",
    "files": {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "test_calc.py": "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
    },
    "check": "python3 -m unittest -q",
    "max_steps": 1,
}
TASKS = [
    {"id": "sum", "instruction": "What is 2 + 3? Answer with the number only.", "answer": 5},
    {
        "id": "inc",
        "kind": "code",
        "instruction": 'def inc(x):\n    """Add one to x."""\n',
        "entry_point": "inc",
        "tests": "def check(candidate):\n    assert candidate(1) == 2\n",
    },
    {
        "id": "hello",
        "instruction": "Say hello.",
        "constraints": [{"type": "number_words", "relation": "less than", "num_words": 30}],
    },
    AGENT,
]


def _file(tmp_path: Path, rows: list[dict[str, object]], name: str = "tasks.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _check_report(report: dict[str, object], ids: list[str]) -> None:
    results = report["results"]
    assert isinstance(results, list)
    assert [r["id"] for r in results] == ids
    assert all(r["rollouts"] >= 1 for r in results)
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert {"answer", "code", "constraints", "agent"} <= set(summary["families"])
    overall = summary["overall"]
    for key in ("success_rate", "ci95", "pass_at_k", "stability", "no_answer", "efficiency", "safety"):
        assert key in overall
    agent = summary["families"]["agent"]
    assert agent["efficiency"]["steps_mean"] >= 1  # the episode ran its step in the sandbox


@pytest.mark.integration
def test_eval_on_the_tiny_model_with_failures_to_seeds(ptf: Ptf, tmp_path: Path, tiny_model: Path) -> None:
    tasks = _file(tmp_path, TASKS)
    result = ptf(
        "eval",
        str(tiny_model),
        "--tasks",
        str(tasks),
        "--tasks",
        "rg:chain_sum:2:seed=3",
        "--rollouts",
        "2",
        "--max-tokens",
        "12",
        "--out",
        str(tmp_path / "r.json"),
        "--failures-to-seeds",
        str(tmp_path / "new.jsonl"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    _check_report(report, ["sum", "inc", "hello", "fix-add", "chain_sum-3-0", "chain_sum-3-1"])
    assert report["summary"]["overall"]["rollouts_per_task"] == 2
    assert (tmp_path / "r.samples.jsonl").is_file()
    seeds = [json.loads(line) for line in (tmp_path / "new.jsonl").read_text().splitlines()]
    run = report["run_id"][:12]
    assert seeds and all(s["id"].startswith(f"eval-{run}:") for s in seeds)
    assert json.loads((tmp_path / "new.provenance.json").read_text())["eval_run_id"] == report["run_id"]


@pytest.mark.slow
@pytest.mark.integration
def test_eval_bundled_on_a_task_file(ptf: Ptf, tmp_path: Path) -> None:
    """The form held-out task files are evaluated with, on the bundled SmolLM2."""
    tasks = _file(tmp_path, [*TASKS, *[r for r in _procedural()]])
    result = ptf("eval", "bundled", "--tasks", str(tasks), "--out", str(tmp_path / "REPORT.json"))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "REPORT.json").read_text())
    _check_report(report, ["sum", "inc", "hello", "fix-add", "chain_sum-5-0"])
    assert report["model"]["given"] == "bundled" and report["model"]["hash"].startswith("sha256:")
    assert "chain_sum" in report["summary"]["families"]


def _procedural() -> list[dict[str, object]]:
    from ptfactory.generators.procedural import draw_seed_rows

    return draw_seed_rows(["chain_sum"], 1, seed=5)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"id": "x"}, "'instruction'"),
        ({"instruction": "Say hi.", "response": "Hi!"}, "'answer'"),  # nothing to check against
        ({"instruction": "f", "kind": "code", "entry_point": "f"}, "'tests'"),
        ({"instruction": "Q?", "answer": 1, "colour": "red"}, "'colour'"),
        ({**AGENT, "max_steps": 0}, "'max_steps'"),
    ],
)
def test_a_bad_task_row_names_the_row_and_field(tmp_path: Path, row: dict[str, object], field: str) -> None:
    path = _file(tmp_path, [TASKS[0], row])
    with pytest.raises(SeedError) as caught:
        load_tasks(str(path))
    message = str(caught.value)
    assert f"{path}:2" in message and field in message and "\n" not in message


@pytest.mark.parametrize("spec", ["rg:chain_sum", "rg:no_such_family:3", "gsm8k:x", "nothing-here"])
def test_a_bad_task_spec_is_a_clear_error(spec: str) -> None:
    with pytest.raises(UserInputError, match="--tasks"):
        load_tasks(spec)


def test_the_cli_exits_2_on_a_bad_row_before_loading_a_model(ptf: Ptf, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(TASKS[0]) + "\n{not json\n", encoding="utf-8")
    result = ptf("eval", "bundled", "--tasks", str(path), "--out", str(tmp_path / "r.json"))
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"{path}:2" in lines[0] and "not valid JSON" in lines[0], result.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.integration
def test_eval_reads_the_eval_section_of_its_config(ptf: Ptf, tmp_path: Path, tiny_model: Path) -> None:
    """factory.yaml's ``eval:`` sets the run (three rollouts here), a flag overrides it, and a wrong
    key there is one line naming it (exit 2) before any model loads. MODEL is an engine of that
    factory.yaml (``generator``: the tiny model) the first time, a folder the next."""
    config = tmp_path / "factory.yaml"
    config.write_text(
        f"engines:\n  generator: {{model: {tiny_model}}}\neval:\n  rollouts: 3\n  max_tokens: 8\n  seed: 4\n",
        encoding="utf-8",
    )
    tasks = ("--tasks", "rg:chain_sum:1:seed=2", "--config", str(config))
    base = ("eval", str(tiny_model), *tasks)
    result = ptf("eval", "generator", *tasks, "--out", str(tmp_path / "a.json"))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["model"]["given"] == "generator" and str(tiny_model) in json.dumps(
        report["model"]["engine"]
    )
    assert report["summary"]["overall"]["rollouts_per_task"] == 3
    assert report["config"]["max_tokens"] == 8 and report["config"]["seed"] == 4
    flagged = ptf(*base, "--rollouts", "2", "--out", str(tmp_path / "b.json"))
    assert flagged.returncode == 0, flagged.stderr[-3000:]
    assert json.loads((tmp_path / "b.json").read_text())["summary"]["overall"]["rollouts_per_task"] == 2
    config.write_text("eval:\n  rolouts: 3\n", encoding="utf-8")
    bad = ptf(*base, "--out", str(tmp_path / "c.json"))
    assert bad.returncode == 2 and "eval.rolouts" in bad.stderr and "rollouts" in bad.stderr, bad.stderr
    assert not (tmp_path / "c.json").exists()
