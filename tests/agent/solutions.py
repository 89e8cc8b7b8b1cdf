"""Recorded reference solutions of the demo agent tasks (demo/agent/tasks.jsonl): tool calls that
solve each task in the sandbox. Replayed by the tests: every one must solve its task."""

from __future__ import annotations

from typing import Any

FIXED_CALC = '''"""Small statistics helpers."""


def mean(values):
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def spread(values):
    return max(values) - min(values)
'''

SOLUTIONS: dict[str, list[dict[str, Any]]] = {
    "fix-failing-test": [
        {"name": "run_tests", "arguments": {}},
        {"name": "read_file", "arguments": {"path": "calc.py"}},
        {"name": "write_file", "arguments": {"path": "calc.py", "content": FIXED_CALC}},
        {"name": "run_tests", "arguments": {}},
    ],
    "rename-function": [
        {"name": "bash", "arguments": {"command": "grep -rn slugify_text --include='*.py' ."}},
        {
            "name": "bash",
            "arguments": {"command": "sed -i 's/slugify_text/slugify/g' textutil.py app.py report.py"},
        },
        {"name": "run_tests", "arguments": {}},
    ],
    "fix-config-value": [
        {"name": "read_file", "arguments": {"path": "README.md"}},
        {"name": "bash", "arguments": {"command": "cat service.ini"}},
        {"name": "bash", "arguments": {"command": "sed -i 's/^timeout_s = 0$/timeout_s = 30/' service.ini"}},
        {"name": "run_tests", "arguments": {}},
    ],
}


def solution_engine() -> Any:
    """The reference solutions as a policy: an :class:`Engine` whose reply to a task's conversation
    is the solution's next call (the task is recognised by its instruction), so they run through
    the same rollout, record and replay path as a model's."""
    import json
    from pathlib import Path

    from ptfactory.engines.base import Completion, Engine
    from ptfactory.generators.agent.tasks import read_tasks

    tasks = read_tasks(Path(__file__).resolve().parents[2] / "demo" / "agent" / "tasks.jsonl")
    by_instruction = {t.instruction: SOLUTIONS[t.id] for t in tasks}

    class SolutionEngine(Engine):
        backend = "reference"

        def _chat(self, conversations: Any, params: Any) -> list[list[Completion]]:
            replies = []
            for conversation in conversations:
                calls = by_instruction[conversation[1]["content"]]
                done = sum(1 for m in conversation if m["role"] == "assistant")
                text = json.dumps(calls[done]) if done < len(calls) else '{"final_answer": "done"}'
                replies.append([Completion(text, 0, 0)] * params.n)
            return replies

    return SolutionEngine(model_id="reference-solutions")
