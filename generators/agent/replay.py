"""Replay: re-execute a trajectory's recorded calls in a fresh sandbox and compare.

Every executed step must reproduce its status, exit code and workspace hash, every check run
its exit code and hash, and the final check the recorded outcome. Steps that executed nothing
(unparsable or invalid replies) are skipped; a policy violation must be refused again. Also
replays reference solutions (a list of calls) to show a task is solvable in the environment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ptfactory.filters.execution.commands import CommandPolicy
from ptfactory.filters.execution.episode import EpisodePool
from ptfactory.generators.agent.policy import validate_call
from ptfactory.generators.agent.tasks import AgentTask
from ptfactory.generators.agent.tools import CheckState, execute_call

__all__ = ["ReplayReport", "recorded_policy", "replay_trajectory", "run_solution"]


@dataclass
class ReplayReport:
    sample_id: str
    task_id: str
    nondeterministic: bool
    steps_checked: int = 0
    mismatches: list[str] = field(default_factory=list)
    solved: bool = False

    @property
    def reproduced(self) -> bool:
        return not self.mismatches

    def to_dict(self) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "task_id": self.task_id,
            "nondeterministic": self.nondeterministic,
            "steps_checked": self.steps_checked,
            "reproduced": self.reproduced,
            "solved": self.solved,
            "mismatches": self.mismatches,
        }


def _compare(report: ReplayReport, where: str, recorded: dict[str, Any], got: dict[str, Any]) -> None:
    for key, value in got.items():
        if recorded.get(key) != value:
            report.mismatches.append(f"{where}: {key} was {recorded.get(key)!r}, replay gave {value!r}")


def replay_trajectory(row: dict[str, Any], pool: EpisodePool) -> ReplayReport:
    """Replay one trajectory (a sample record of kind ``agent``) in a fresh container of ``pool``."""
    outcome = row["outcome"]
    task = AgentTask.from_json(outcome["task"])
    report = ReplayReport(row["sample_id"], task.id, task.nondeterministic)
    with pool.open(task.files) as episode:
        if episode.initial_hash != outcome["initial_hash"]:
            report.mismatches.append(
                f"setup: workspace hash {episode.initial_hash} != {outcome['initial_hash']}"
            )
        check = CheckState(episode, task)
        initial = check.run()
        _compare(report, "initial check", outcome["initial_check"], {"check_exit": initial["check_exit"]})
        for step in row["steps"]:
            where = f"step {step['index']}"
            if step["kind"] in ("tool", "policy_violation"):
                arguments = json.loads(step["arguments"])
                result = execute_call(episode, task, step["name"], arguments)
                report.steps_checked += 1
                got = {"status": result.status, "exit_code": result.exit_code, "tree_hash": result.tree_hash}
                _compare(report, where, step, got)
                if step["name"] == "run_tests" and result.status != "policy_violation":
                    check.record(result)
            if step.get("checked") and step["name"] != "run_tests":
                ran = check.run()
                _compare(
                    report,
                    f"{where} check",
                    step,
                    {"check_exit": ran["check_exit"], "check_hash": ran["check_hash"]},
                )
            if not episode.alive:
                break
        report.solved = check.passed
    if report.solved != outcome["solved"]:
        report.mismatches.append(f"outcome: solved was {outcome['solved']}, replay gave {report.solved}")
    return report


def recorded_policy(row: dict[str, Any]) -> CommandPolicy | None:
    """The command policy the trajectory ran under (replay refuses what the run refused)."""
    recorded = json.loads(row["outcome"].get("policy") or "{}")
    return CommandPolicy(recorded["mode"], tuple(recorded["rules"])) if recorded else None


def run_solution(task: AgentTask, calls: list[dict[str, Any]], pool: EpisodePool) -> tuple[bool, list[str]]:
    """Run a reference solution (``[{"name", "arguments"}, …]``): (solved, hashes after each call).
    Every call must be valid for the task and run without a policy violation."""
    hashes: list[str] = []
    with pool.open(task.files) as episode:
        for number, call in enumerate(calls):
            if error := validate_call(call["name"], call["arguments"], task):
                raise ValueError(f"{task.id} solution call {number}: {error}")
            result = execute_call(episode, task, call["name"], call["arguments"])
            if result.status == "policy_violation":
                raise ValueError(f"{task.id} solution call {number}: {result.detail}")
            hashes.append(result.tree_hash or "")
        final = episode.run_check(task.check)
    return final.status == "passed", hashes
