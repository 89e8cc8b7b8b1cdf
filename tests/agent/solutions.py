"""The demo agent tasks' reference solutions (their ``solution`` field in demo/agent/tasks.jsonl):
tool calls that solve each task in the sandbox. Replayed by the tests: every one must solve its task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptfactory.engines.base import Engine
from ptfactory.generators.agent.reference import ReferenceEngine
from ptfactory.generators.agent.tasks import read_tasks

TASKS = read_tasks(Path(__file__).resolve().parents[2] / "demo" / "agent" / "tasks.jsonl")
SOLUTIONS: dict[str, list[dict[str, Any]]] = {t.id: t.solution or [] for t in TASKS}


def solution_engine() -> Engine:
    """The reference solutions as a policy (the factory's own :class:`ReferenceEngine`), so they run
    through the same rollout, record and replay path as a model's."""
    return ReferenceEngine(TASKS)
