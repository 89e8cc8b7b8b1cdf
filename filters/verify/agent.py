"""The agent verifier: the episode's final workspace, rebuilt in a fresh sandbox, and its check re-run.

An agent row (kind ``agent``) carries everything replay needs: ``outcome.task`` (the workspace and
the check command, as JSON), ``outcome.policy`` (the command policy it ran under) and ``steps``
(each executed tool call). The verifier opens a fresh episode container
(:class:`~ptfactory.filters.execution.episode.EpisodePool`, the recorded policy), replays the
executed calls in order (running the task's check after the steps where the rollout ran it: a check
may write to the workspace), then runs the check once more on the final state: its outcome decides.
The replay mirrors ``generators/agent/tools.execute_call`` and ``generators/agent/replay.py`` (which
also compares every step; a layer above, so not importable from here).

=========================================  ===========================================================
replayed final check                       verdict (reason)
=========================================  ===========================================================
passed, the recorded outcome solved        pass (``check_passed``)
passed, the recorded outcome unsolved      abstain (``replay_disagrees``: a nondeterministic task)
failed / timeout / oom / output_limit      fail (``check_failed`` / ``check_<status>``): final
the sandbox failed (``sandbox_error``)     recorded unsolved: fail (``episode_failed``); recorded
                                           solved: abstain (``sandbox_error``), or fail with
                                           ``infra_error="fail"`` (rewards: a run that takes the
                                           sandbox down earns 0)
=========================================  ===========================================================

Evidence: the check command, its status, exit code and output tail (the agent check output), the
recorded outcome (solved, stop reason, the last recorded test counts), the steps replayed, and
whether the final workspace hash matches the recorded one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from ptfactory.errors import SandboxError
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.commands import CommandPolicy
from ptfactory.filters.execution.episode import Episode, EpisodePool, StepResult
from ptfactory.filters.verify.base import Verdict, Verifier

__all__ = ["AgentVerifier", "replay_final_check"]

_OUTPUT_CHARS = 2000


def _policy(outcome: Mapping[str, Any]) -> CommandPolicy | None:
    recorded = json.loads(outcome.get("policy") or "{}")
    return CommandPolicy(recorded["mode"], tuple(recorded["rules"])) if recorded else None


def _call(episode: Episode, check: str, name: str, arguments: Mapping[str, Any]) -> StepResult | None:
    if name == "bash":
        return episode.bash(str(arguments["command"]))
    if name == "read_file":
        return episode.read_file(str(arguments["path"]))
    if name == "write_file":
        return episode.write_file(str(arguments["path"]), str(arguments["content"]))
    if name == "run_tests":
        return episode.run_check(check)
    return None


def replay_final_check(row: Mapping[str, Any], sandbox: Sandbox) -> tuple[StepResult, int, str | None]:
    """(the final state's check, steps replayed, the final workspace hash) for an agent ``row``.

    Raises :class:`SandboxError` when the workspace cannot be set up."""
    outcome = row["outcome"]
    task = json.loads(outcome["task"])
    pool = EpisodePool(sandbox, _policy(outcome))
    replayed = 0
    tree: str | None = None
    with pool.open(task["files"]) as episode:
        tree = episode.initial_hash
        for step in row.get("steps") or []:
            if step["kind"] == "tool":  # a refused call (policy_violation) executed nothing
                result = _call(episode, task["check"], step["name"], json.loads(step["arguments"] or "{}"))
                replayed += 1
                tree = result.tree_hash if result else tree
                if step.get("checked") and step["name"] != "run_tests":
                    tree = episode.run_check(task["check"]).tree_hash or tree
            if not episode.alive:
                break
        final = episode.run_check(task["check"])
    return final, replayed, tree


class AgentVerifier(Verifier):
    """``sandbox``: the Docker sandbox episodes run in (the bubblewrap fallback refuses episodes);
    rows replay ``sandbox.workers`` at a time."""

    kind = "agent"

    def __init__(
        self, sandbox: Sandbox, infra_error: Literal["abstain", "fail"] = "abstain", name: str | None = None
    ) -> None:
        super().__init__(name)
        self.sandbox = sandbox
        self.infra_error = infra_error

    def applies(self, row: Mapping[str, Any]) -> bool:
        outcome = row.get("outcome") or {}
        return row.get("kind") == "agent" and bool(outcome.get("task"))

    def verify_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        with ThreadPoolExecutor(max_workers=max(1, min(self.sandbox.workers, len(rows) or 1))) as threads:
            return list(threads.map(self._one, rows))

    def _one(self, row: Mapping[str, Any]) -> Verdict:
        if not self.applies(row):
            return self.not_applicable()
        outcome = row["outcome"]
        checks = [s for s in row.get("steps") or [] if s.get("checked")]
        recorded = {
            "recorded_solved": bool(outcome.get("solved")),
            "stop_reason": outcome.get("stop_reason"),
            "tests_passed": checks[-1].get("tests_passed") if checks else None,
            "tests_total": checks[-1].get("tests_total") if checks else None,
            "check": json.loads(outcome["task"]).get("check"),
        }
        try:
            final, replayed, tree = replay_final_check(row, self.sandbox)
        except SandboxError as exc:
            return self._infra(recorded, detail=str(exc)[:500])
        steps = row.get("steps") or []
        recorded_tree = next((s.get("tree_hash") for s in reversed(steps) if s.get("tree_hash")), None)
        evidence = {
            **recorded,
            "status": final.status,
            "exit_code": final.exit_code,
            "output_tail": final.output[-_OUTPUT_CHARS:],
            "detail": final.detail,
            "steps_replayed": replayed,
            "workspace_reproduced": recorded_tree is None or recorded_tree == tree,
        }
        if final.status == "sandbox_error":
            return self._infra(evidence, detail=final.detail)
        if final.status != "passed":
            reason = "check_failed" if final.status == "failed" else f"check_{final.status}"
            return self.verdict("fail", reason, **evidence)
        if not recorded["recorded_solved"]:
            return self.abstain("replay_disagrees", **evidence)
        return self.verdict("pass", "check_passed", **evidence)

    def _infra(self, evidence: dict[str, Any], detail: str) -> Verdict:
        evidence = {**evidence, "detail": detail}
        if not evidence["recorded_solved"]:
            return self.verdict("fail", "episode_failed", **evidence)
        if self.infra_error == "fail":
            return self.verdict("fail", "sandbox_error", **evidence)
        return self.abstain("sandbox_error", **evidence)
