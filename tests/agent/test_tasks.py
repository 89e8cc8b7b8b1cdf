"""The kind-agent seed contract: valid rows load, bad rows are errors naming the row and field;
the demo tasks and the HumanEval converter produce valid workspaces."""

import io
import json
import tarfile
from pathlib import Path

import pytest

from ptfactory.errors import SeedError
from ptfactory.generators.agent.tasks import (
    DEFAULT_TOOLS,
    MAX_WORKSPACE_BYTES,
    AgentTask,
    humaneval_tasks,
    parse_task,
    read_tasks,
)

REPO = Path(__file__).resolve().parents[2]
GOOD = {
    "kind": "agent",
    "id": "t1",
    "instruction": "fix it",
    "files": {"a.py": "x = 1\n"},
    "check": "python3 a.py",
}


def _write(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_good_row_with_defaults(tmp_path: Path) -> None:
    (task,) = read_tasks(_write(tmp_path, GOOD))
    assert task.id == "t1" and task.files == {"a.py": "x = 1\n"} and task.check == "python3 a.py"
    assert task.tool_names == list(DEFAULT_TOOLS) and task.max_steps == 10 and not task.nondeterministic
    assert task.source.endswith("tasks.jsonl:1")
    assert AgentTask.from_json(task.to_json()) == task


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"check": None}, "field 'check' is missing"),
        ({"check": "  "}, "field 'check' must be non-empty"),
        ({"instruction": None}, "field 'instruction' is missing"),
        ({"files": {"../x": "y"}}, "field 'files': '../x' leaves the workspace"),
        ({"files": {"/etc/passwd": "y"}}, "field 'files': '/etc/passwd' is not a relative path"),
        ({"files": {"a/../../b": "y"}}, "leaves the workspace"),
        ({"files": {"a.py": 3}}, "must map to text"),
        ({"files": {}}, "non-empty object"),
        (
            {"files": {"big.txt": "x" * (MAX_WORKSPACE_BYTES + 1)}},
            "field 'files': the workspace is too large",
        ),
        ({"kind": "code"}, "field 'kind' is 'code'"),
        ({"max_steps": 0}, "field 'max_steps'"),
        ({"time_limit_s": -1}, "field 'time_limit_s'"),
        ({"nondeterministic": "yes"}, "field 'nondeterministic'"),
        ({"tools": ["bash", "browser"]}, "unknown tool 'browser'"),
        ({"tools": [{"name": "bash", "parameters": {"type": "string"}}]}, "type object"),
        ({"colour": "red"}, "unknown field 'colour'"),
        ({"workspace": "w"}, "exactly one of field 'files'"),
    ],
)
def test_bad_rows_name_the_row_and_field(tmp_path: Path, change: dict, message: str) -> None:
    row = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    path = _write(tmp_path, GOOD | {"id": "ok"}, row)
    with pytest.raises(SeedError, match=r"tasks\.jsonl:2") as info:
        read_tasks(path)
    assert message in str(info.value)


def test_repeated_ids_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(SeedError, match="'t1' repeats"):
        read_tasks(_write(tmp_path, GOOD, GOOD))
    path = tmp_path / "bad.jsonl"
    path.write_text("{nope\n")
    with pytest.raises(SeedError, match=r"bad\.jsonl:1: not valid JSON"):
        read_tasks(path)


def test_workspace_folder_and_tar(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "m.py").write_text("y = 2\n")
    row = {k: v for k, v in GOOD.items() if k != "files"}
    task = parse_task("x:1", {**row, "workspace": "ws"}, base=tmp_path)
    assert task.files == {"pkg/m.py": "y = 2\n"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("./ok.py", "../evil.py"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"1"))
    (tmp_path / "ws.tar.gz").write_bytes(buffer.getvalue())
    with pytest.raises(SeedError, match=r"field 'workspace'.*leaves the workspace"):
        parse_task("x:1", {**row, "workspace": "ws.tar.gz"}, base=tmp_path)
    with pytest.raises(SeedError, match="neither a folder nor a tar"):
        parse_task("x:1", {**row, "workspace": "missing"}, base=tmp_path)


def test_demo_tasks_are_valid_and_deterministic() -> None:
    tasks = read_tasks(REPO / "demo" / "agent" / "tasks.jsonl")
    assert {t.id for t in tasks} >= {"fix-failing-test", "rename-function", "fix-config-value"}
    assert sum(t.nondeterministic for t in tasks) <= 1


def test_humaneval_converter() -> None:
    tasks = humaneval_tasks(count=164)
    assert len(tasks) == 164 and len({t.id for t in tasks}) == 164
    first = tasks[0]
    assert set(first.files) == {"solution.py", "test_solution.py"}
    assert "raise NotImplementedError" in first.files["solution.py"]
    assert first.files["test_solution.py"].count("def test_") == 7  # one test per assert
    assert first.check == "python3 -m unittest -q"
    for task in tasks:  # every generated test module is valid Python
        compile(task.files["test_solution.py"], task.id, "exec")
        compile(task.files["solution.py"], task.id, "exec")
