"""Rollouts and their verdicts: every task answered K times through the factory's engine, every
answer checked by the factory's verifiers (code and agent steps in the sandbox only).

:func:`rollouts` returns one record per (task, rollout): the answer, its verdict, tokens, steps,
seconds and what the sandbox stopped (:mod:`.safety`); :mod:`.report` turns them into the
report. A rollout succeeds when every verifier that applies passes (agent tasks: the task's check
passed in the episode's sandbox). Verifiers run with the rewards' policy (``infra_error="fail"``):
a solution that takes its runner down or runs out of time fails; it is never an abstention.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ptfactory.engines.base import Engine, SamplingParams
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.commands import CommandPolicy
from ptfactory.filters.verify import (
    AnswerVerifier,
    CodeVerifier,
    ConstraintsVerifier,
    ProceduralVerifier,
    Verdict,
    Verifier,
    verify_rows,
)
from ptfactory.training.eval.config import EvalSection
from ptfactory.training.eval.safety import code_violations
from ptfactory.training.eval.tasks import EvalTask

__all__ = ["outcome_of", "rollouts"]

# a rollout's outcome when its verdicts disagree: the worst one names it
_ORDER = ("fail", "no_answer", "partial", "abstain", "pass")


def outcome_of(verdicts: Sequence[Verdict]) -> tuple[bool, str, str]:
    """(success, verdict, reason) of one rollout from the verdicts of the verifiers that applied."""
    if not verdicts:
        return False, "abstain", "no_verifier_applies"
    worst = min(verdicts, key=lambda v: _ORDER.index(v.verdict))
    return worst.verdict == "pass" and all(v.passed for v in verdicts), worst.verdict, worst.reason


def _verifiers(tasks: Sequence[EvalTask], sandbox: Callable[[], Sandbox] | None) -> list[Verifier]:
    kinds = {t.kind for t in tasks}
    found: list[Verifier] = []
    if "answer" in kinds:
        found.append(AnswerVerifier())
    if "procedural" in kinds:
        found.append(ProceduralVerifier())
    if "constraints" in kinds or any((t.reference or {}).get("constraints") for t in tasks):
        found.append(ConstraintsVerifier())
    if "code" in kinds:
        if sandbox is None:
            raise ValueError("code tasks need a sandbox: untrusted code runs nowhere else")
        found.append(CodeVerifier(sandbox(), infra_error="fail", use_recorded=False))
    return found


def _single_turn(
    tasks: Sequence[EvalTask],
    engine: Engine,
    settings: EvalSection,
    sandbox: Callable[[], Sandbox] | None,
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    params = SamplingParams(
        n=settings.rollouts,
        temperature=settings.sampling_temperature(),
        top_p=settings.top_p if settings.sampling_temperature() > 0 else 1.0,
        max_tokens=settings.max_tokens,
        seed=settings.seed,
    )
    say(f"generating {len(tasks)} tasks x {settings.rollouts} rollouts with {engine.model_id}")
    started = time.perf_counter()
    answers = engine.chat([list(t.prompt) for t in tasks], params)
    per_rollout = (time.perf_counter() - started) / max(1, len(tasks) * settings.rollouts)
    rows, owners = [], []
    for task, completions in zip(tasks, answers, strict=True):
        for index, completion in enumerate(completions):
            row = task.row(completion.text)
            row["provenance"] = {"finish_reason": completion.finish_reason}
            rows.append(row)
            owners.append((task, index, completion))
    say(f"verifying {len(rows)} answers")
    verifiers = _verifiers(tasks, sandbox)
    started = time.perf_counter()
    try:
        verdicts = verify_rows(rows, verifiers)
    finally:
        for verifier in verifiers:
            verifier.close()
    verify_s = (time.perf_counter() - started) / max(1, len(rows))
    records = []
    for (task, index, completion), found in zip(owners, verdicts, strict=True):
        success, verdict, reason = outcome_of(found)
        violations: Counter[str] = Counter()
        timeouts = 0
        for v in found:
            if v.kind == "code":
                violations += code_violations(v.evidence)
                timeouts += v.evidence.get("status") == "timeout"
        records.append(
            _record(
                task,
                index,
                success,
                verdict,
                reason,
                response=completion.text,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                finish_reason=completion.finish_reason,
                steps=1,
                seconds=per_rollout + verify_s,
                violations=dict(violations),
                timeouts=timeouts,
                verdicts=[v.to_record() for v in found],
            )
        )
    return records


def _agent(
    tasks: Sequence[EvalTask],
    engine: Engine,
    settings: EvalSection,
    sandbox: Callable[[], Sandbox] | None,
    *,
    policy: CommandPolicy | None,
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    from ptfactory.filters.execution.episode import EpisodePool
    from ptfactory.generators.agent.rollout import RolloutConfig, run_rollouts

    if sandbox is None:
        raise ValueError("agent tasks need a sandbox: their steps run nowhere else")
    pool = EpisodePool(sandbox(), policy)
    config = RolloutConfig(
        rollouts=settings.rollouts,
        temperature=settings.sampling_temperature(),
        max_tokens=settings.max_tokens,
        seed=settings.seed,
        max_steps=settings.agent_max_steps,
        batch="eval",
    )
    by_id = {t.agent.id: t for t in tasks if t.agent is not None}
    rows = run_rollouts([t.agent for t in tasks if t.agent is not None], engine, pool, config, progress=say)
    records = []
    for row in rows:
        outcome = row["outcome"]
        task = by_id[outcome["task_id"]]
        solved = bool(outcome["solved"])
        violations = {"command_refused": int(outcome["violations"] or 0)} if outcome["violations"] else {}
        timeouts = sum(1 for s in row["steps"] or [] if s.get("status") == "timeout")
        records.append(
            _record(
                task,
                int(outcome["rollout"]),
                solved,
                "pass" if solved else "fail",
                "check_passed" if solved else f"unsolved_{outcome['stop_reason']}",
                response=row["messages"][-1]["content"] if row["messages"] else "",
                prompt_tokens=int(outcome["prompt_tokens"] or 0),
                completion_tokens=int(outcome["completion_tokens"] or 0),
                finish_reason=(row.get("provenance") or {}).get("finish_reason"),
                steps=int(outcome["n_steps"] or 0),
                seconds=float(outcome["wall_s"] or 0.0),
                violations=violations,
                timeouts=timeouts,
                verdicts=[],
                episode={"stop_reason": outcome["stop_reason"], "sandbox_s": outcome["sandbox_s"]},
            )
        )
    return records


def _record(
    task: EvalTask, rollout: int, success: bool, verdict: str, reason: str, **fields: Any
) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "family": task.family,
        "kind": task.kind,
        "rollout": rollout,
        "success": success,
        "verdict": verdict,
        "reason": reason,
        **fields,
    }


class _LazySandbox:
    """The sandbox, built on first use and once (code and agent tasks share it), closed after."""

    def __init__(self, factory: Callable[[], Sandbox] | None) -> None:
        self.factory = factory
        self.sandbox: Sandbox | None = None

    def __call__(self) -> Sandbox:
        if self.factory is None:
            raise ValueError("code and agent tasks need the sandbox: untrusted code runs nowhere else")
        if self.sandbox is None:
            self.sandbox = self.factory()
        return self.sandbox

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None


def rollouts(
    tasks: Sequence[EvalTask],
    engine: Engine,
    settings: EvalSection,
    *,
    sandbox: Callable[[], Sandbox] | None = None,
    policy: CommandPolicy | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> list[dict[str, Any]]:
    """One record per (task, rollout), in task order. ``sandbox`` builds the sandbox (called only
    when a code or agent task needs one); ``policy`` is the agent episodes' command policy."""
    single = [t for t in tasks if t.kind != "agent"]
    agent = [t for t in tasks if t.kind == "agent"]
    boxes = _LazySandbox(sandbox)
    try:
        records = _single_turn(single, engine, settings, boxes, say) if single else []
        if agent:
            records += _agent(agent, engine, settings, boxes, policy=policy, say=say)
    finally:
        boxes.close()
    order = {t.id: i for i, t in enumerate(tasks)}
    return sorted(records, key=lambda r: (order[r["task_id"]], r["rollout"]))
