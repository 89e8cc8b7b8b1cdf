"""How a tool call runs in an episode: shared by rollouts and replay, so both execute alike."""

from __future__ import annotations

from typing import Any

from ptfactory.filters.execution.episode import Episode, StepResult
from ptfactory.generators.agent.rewards import parse_test_counts
from ptfactory.generators.agent.tasks import AgentTask

__all__ = ["CheckState", "execute_call"]


def execute_call(episode: Episode, task: AgentTask, name: str, arguments: dict[str, Any]) -> StepResult:
    """Run one validated call (see :func:`~ptfactory.generators.agent.policy.validate_call`)."""
    if name == "bash":
        return episode.bash(str(arguments["command"]))
    if name == "read_file":
        return episode.read_file(str(arguments["path"]))
    if name == "write_file":
        return episode.write_file(str(arguments["path"]), str(arguments["content"]))
    if name == "run_tests":
        return episode.run_check(task.check)
    raise ValueError(f"no tool {name!r}")


class CheckState:
    """Runs the task's check when the workspace changed since it last ran, and says how it went.

    Rollout and replay run it at the same points (after the same steps), so a check that writes
    to the workspace still replays to the same hashes.
    """

    def __init__(self, episode: Episode, task: AgentTask) -> None:
        self.episode = episode
        self.task = task
        self.last_hash: str | None = None
        self.passed: bool = False

    def run(self) -> dict[str, Any]:
        result = self.episode.run_check(self.task.check)
        return self.record(result)

    def record(self, result: StepResult) -> dict[str, Any]:
        """The check's fields of a step record (after a check run or a ``run_tests`` call)."""
        self.last_hash = result.tree_hash
        self.passed = result.status == "passed"
        counts = parse_test_counts(result.output)
        return {
            "checked": True,
            "check_exit": result.exit_code,
            "tests_passed": counts[0] if counts else None,
            "tests_total": counts[1] if counts else None,
            "check_hash": result.tree_hash,
        }

    def needed(self, tree_hash: str | None) -> bool:
        return tree_hash is not None and tree_hash != self.last_hash
