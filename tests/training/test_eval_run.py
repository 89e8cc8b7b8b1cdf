"""``ptf eval``'s library on every single-turn task type, through the real verifiers and the real
Docker sandbox: code graded there, a hostile solution contained and counted, the report's fields,
failures turned into seeds with the eval run in their provenance (benchmark items never), and the
report linked in lineage (checkpoint <- version <- batches)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptfactory.engines.spec import EngineSpec
from ptfactory.filters.decontamination import DecontaminationConfig, check_texts, load_index
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.generators.seeds import read_seeds, seeds_to_table
from ptfactory.training.eval.config import EvalSection
from ptfactory.training.eval.evaluate import evaluate, load_all
from ptfactory.training.eval.failures import failure_seeds, write_failure_seeds
from ptfactory.training.eval.model import EvalModel
from ptfactory.training.eval.report import samples_path
from tests.training.scripted import ScriptedEngine

RIGHT_INC = "```python\ndef inc(x):\n    return x + 1\n```"
# reaches for the network: the container has none
HOSTILE_NET = (
    "```python\ndef inc(x):\n    return x + 1\n\nimport socket\n"
    "socket.create_connection(('203.0.113.7', 80), timeout=3)\n```"
)
# writes outside its folder: the root is read-only and it runs as nobody
HOSTILE_FS = "```python\ndef dec(x):\n    return x - 1\n\nopen('/usr/lib/ptf-owned.txt', 'w').write('x')\n```"
RIGHT_DEC = "```python\ndef dec(x):\n    return x - 1\n```"

TASKS = [
    {"id": "sum", "instruction": "What is 2 + 3?", "answer": 5},
    {
        "id": "inc",
        "kind": "code",
        "instruction": 'def inc(x):\n    """Add one to x."""\n',
        "entry_point": "inc",
        "tests": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n",
    },
    {
        "id": "dec",
        "kind": "code",
        "instruction": 'def dec(x):\n    """Subtract one from x."""\n',
        "entry_point": "dec",
        "tests": "def check(candidate):\n    assert candidate(1) == 0\n",
    },
    {
        "id": "hello",
        "instruction": "Say hello in under five words.",
        "constraints": [{"type": "number_words", "relation": "less than", "num_words": 5}],
    },
]
SCRIPT = {
    "What is 2 + 3?": ["The answer is 5.", "#### 6"],
    "def inc(x)": [RIGHT_INC, HOSTILE_NET],
    "def dec(x)": [HOSTILE_FS, RIGHT_DEC],
    "Say hello": ["Hello there.", "one two three four five six seven"],
    "1663 - 5242 - 9376 - 8961 + 7634": ["<answer>-14282</answer>", "<answer>0</answer>"],
    "4 - 1 - 7": ["I would rather not say.", "<answer>-4</answer>"],
}


def sandbox() -> DockerSandbox:
    """What evaluate opens (once, on the first code task) and closes when it is done."""
    return DockerSandbox(Limits(timeout_s=5, memory_mb=128, pids=32), workers=2)


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS), encoding="utf-8")
    return path


def _scripted(extra: dict[str, list[str]] | None = None) -> tuple[EvalModel, ScriptedEngine]:
    engine = ScriptedEngine(model_id="scripted", script={**(extra or {}), **SCRIPT})
    return EvalModel("scripted", EngineSpec(backend="openai", model="scripted")), engine


@pytest.mark.integration
def test_every_task_type_is_verified_and_the_report_says_so(task_file: Path, tmp_path: Path) -> None:
    model, engine = _scripted()
    out = tmp_path / "report.json"
    result = evaluate(
        model,
        [str(task_file), "rg:chain_sum:2"],
        EvalSection(rollouts=2),
        engine=engine,
        sandbox=sandbox,
        out=out,
    )
    report = json.loads(out.read_text())
    by_id = {r["id"]: r for r in report["results"]}
    assert list(by_id) == ["sum", "inc", "dec", "hello", "chain_sum-0-0", "chain_sum-0-1"]
    assert {r["id"]: r["successes"] for r in report["results"]} == {
        "sum": 1,  # math-verify: 5 right, 6 wrong
        "inc": 1,  # graded in the sandbox; the hostile rollout fails
        "dec": 1,
        "hello": 1,
        "chain_sum-0-0": 1,  # reasoning-gym's scorer
        "chain_sum-0-1": 1,
    }
    families = report["summary"]["families"]
    assert set(families) == {"answer", "code", "constraints", "chain_sum"}
    overall = report["summary"]["overall"]
    assert overall["success_rate"] == pytest.approx(0.5)
    assert overall["pass_at_k"] == {"1": pytest.approx(0.5), "2": pytest.approx(1.0)}
    assert overall["stability"] == 0.0  # every task: one rollout right, one wrong
    low, high = overall["ci95"]
    assert low <= 0.5 <= high and "bootstrap" in overall["ci_method"]
    assert overall["no_answer"]["count"] == 1  # "I would rather not say.": counted apart
    # the hostile solutions ran in the sandbox, were stopped, and count
    safety = families["code"]["safety"]
    assert safety["by_category"]["network"] >= 1, safety
    assert safety["by_category"]["filesystem"] >= 1, safety
    assert families["answer"]["safety"]["violations"] == 0
    assert not Path("/usr/lib/ptf-owned.txt").exists()
    for key in ("prompt_tokens_mean", "completion_tokens_mean", "steps_mean", "seconds_per_rollout"):
        assert overall["efficiency"][key] is not None
    assert report["schema"] == "ptf-eval/1" and report["run_id"] == result.run_id
    assert report["model"]["hash"].startswith("identity:")
    assert report["config"]["seed"] == 0 and report["config"]["rollouts"] == 2
    assert report["code_version"] and report["versions"]["transformers"]
    samples = [json.loads(line) for line in samples_path(out).read_text().splitlines()]
    assert len(samples) == 12 and report["samples_file"] == samples_path(out).name
    hostile = next(s for s in samples if s["task_id"] == "inc" and not s["success"])
    assert hostile["violations"] == {"network": 1}
    evidence = json.loads(hostile["verdicts"][0]["evidence"])
    assert evidence["status"] == "failed" and "unreachable" in evidence["stderr_tail"].lower()


@pytest.mark.integration
def test_failures_become_seeds_that_name_the_eval_run(task_file: Path, tmp_path: Path) -> None:
    gsm = "Janet\u2019s ducks lay 16 eggs per day."  # GSM8K test item 0 opens with this
    planted = tmp_path / "planted.jsonl"
    planted.write_text(
        json.dumps(
            {
                "id": "planted",
                "instruction": "Janet\u2019s ducks lay 16 eggs per day. She eats three for breakfast every "
                "morning and bakes muffins for her friends every day with four. She sells the remainder at "
                "the farmers' market daily for $2 per fresh duck egg. How much in dollars does she make "
                "every day at the farmers' market?",
                "answer": 18,
            }
        )
        + "\n"
    )
    evolved = "Task: What is 2 + 3 + 4, and which of the sums is the largest?"
    model, engine = _scripted(
        {
            gsm: ["#### 3"],
            "A robe takes": ["#### 1"],
            "Rewrite the task": [evolved],
            "Write a new task": [evolved],
        }
    )
    specs = [str(task_file), "rg:chain_sum:2", "gsm8k:2", str(planted)]
    tasks = load_all(specs)
    result = evaluate(model, specs, EvalSection(rollouts=2), tasks=tasks, engine=engine, sandbox=sandbox)
    index = load_index(DecontaminationConfig(), tmp_path / "state")
    seeds = failure_seeds(result.report, tasks, engine=engine, index=index)
    run = result.run_id[:12]
    assert seeds.rows and all(r["id"].startswith(f"eval-{run}:") for r in seeds.rows)
    assert seeds.skipped["benchmark_task"] == 2  # gsm8k items: never seeds
    assert seeds.skipped["indexed_benchmark_item"] == 1  # a test item in a user's file: neither
    assert not any("planted" in r["id"] or "gsm8k" in r["id"] for r in seeds.rows)
    procedural = [r for r in seeds.rows if ":new-chain_sum-" in r["id"]]
    asked = {t.extra["seed"]["instruction"] for t in tasks if t.family == "chain_sum"}
    assert len(procedural) == 4 and not {r["instruction"] for r in procedural} & asked  # 2 per failed task
    assert all(r["metadata"]["source_dataset"] == "chain_sum" for r in procedural)
    evol = [r for r in seeds.rows if ":evol-" in r["id"]]
    assert {r["id"].split(":")[1] for r in evol} <= {"sum", "inc", "dec", "hello"} and evol
    assert all(hit is None for hit in check_texts([r["instruction"] for r in seeds.rows], index))

    path = tmp_path / "new.jsonl"
    sidecar = write_failure_seeds(seeds, path, result.report, None)
    assert json.loads(sidecar.read_text())["eval_run_id"] == result.run_id
    table = seeds_to_table(read_seeds(path), "next-batch")  # a valid seed file, as `ptf run` reads it
    provenance = table.column("provenance").to_pylist()
    assert all(run in p["seed_task_id"] for p in provenance)  # every row derived from it says so


HUMANEVAL_0 = (
    "```python\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for j, b in enumerate(numbers) if i != j)\n```"
)


def test_a_restated_signature_gets_the_prompts_imports() -> None:
    from ptfactory.filters.execution.programs import extract_solution

    prompt = (
        "```python\nfrom typing import List\nimport math\n\n\ndef f(xs: List[int]) -> int:\n    pass\n```"
    )
    solution = extract_solution(
        prompt, "```python\nimport math\ndef f(xs: List[int]) -> int:\n    return 1\n```", "f"
    )
    assert solution.splitlines()[:2] == ["from typing import List", "import math"]
    prose = "Write f. From the list, pick one.\nfrom the list pick one"
    assert (
        extract_solution(prose, "```python\ndef f(x):\n    return 1\n```", "f") == "def f(x):\n    return 1\n"
    )


@pytest.mark.integration
def test_humaneval_graded_as_prompt_plus_completion(tmp_path: Path) -> None:
    """A reply that restates HumanEval/0's signature (List from the prompt's import) passes."""
    model, engine = _scripted({"has_close_elements": [HUMANEVAL_0]})
    result = evaluate(model, ["humaneval:1"], EvalSection(), engine=engine, sandbox=sandbox)
    assert [(r["id"], r["successes"]) for r in result.report["results"]] == [("HumanEval/0", 1)]
