"""Rollouts: ``n`` episodes per task, driven by any engine, all live episodes advancing together.

The engine sees the record's own conversation (assistant ``tool_calls``, ``tool`` results) with the
task's tools passed natively (``Engine.chat(..., tools=)``); on engines that constrain JSON and do
not parse calls themselves, every reply is constrained to :func:`~.policy.reply_schema`.

Each step is one batched ``engine.chat_many`` call over the live episodes (their tasks' reply
schemas and tools side by side; identical conversations are asked once with ``n`` completions,
so rollouts that share a history still sample independently), then every episode's tool call
runs in parallel, up to the pool's size. An episode ends on a final answer, a passing check,
``max_steps``, ``time_limit_s`` (of sandbox time) or a container a step took down. At most
``pool.workers`` episodes are live at once (each holds a container; factory.yaml's
``agent.workers``, by default every episode up to 8); more run in waves.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ptfactory import code_version
from ptfactory.engines.base import Completion, Engine, SamplingParams
from ptfactory.filters.execution.episode import Episode, EpisodePool, StepResult
from ptfactory.generators.agent.policy import Action, action_of, reply_schema, system_prompt
from ptfactory.generators.agent.rewards import RewardWeights, step_rewards
from ptfactory.generators.agent.tasks import AgentTask
from ptfactory.generators.agent.tools import CheckState, execute_call
from ptfactory.storage.schema import sample_id

__all__ = ["RolloutConfig", "run_rollouts", "tools_json"]

_PROMPT_OUTPUT_CHARS = 1500  # of a tool's output, shown to the model (the record keeps the tail)


@dataclass(frozen=True)
class RolloutConfig:
    rollouts: int = 1
    temperature: float = 0.7
    max_tokens: int = 256
    seed: int = 0
    max_steps: int | None = None  # overrides every task's own budget when set (tests, smoke runs)
    weights: RewardWeights = field(default_factory=RewardWeights)
    batch: str = "cli"  # the rows' ``batch`` (the factory's partition key)

    def sampling(self) -> dict[str, Any]:
        keys = ("rollouts", "temperature", "max_tokens", "seed", "max_steps")
        return {k: getattr(self, k) for k in keys}


def tools_json(tools: Sequence[dict[str, Any]]) -> str:
    """The ``tools`` column: canonical JSON (so the same tools hash alike)."""
    return json.dumps(list(tools), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class _Run:
    """One live episode: its sandbox, its record and the conversation the engine sees."""

    def __init__(self, task: AgentTask, rollout: int, episode: Episode, max_steps: int) -> None:
        self.task, self.rollout, self.episode = task, rollout, episode
        self.max_steps = max_steps
        self.started = time.perf_counter()
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(task)},
            {"role": "user", "content": task.instruction},
        ]
        self.steps: list[dict[str, Any]] = []
        self.check = CheckState(episode, task)
        self.initial = {"index": -1, "kind": "check", **self.check.run()}
        self.stop_reason = ""
        self.solved = False

    @property
    def done(self) -> bool:
        return bool(self.stop_reason)

    def conversation(self) -> list[dict[str, Any]]:
        """What the engine sees: the record's messages, long tool outputs cut to their tail."""
        seen = []
        for message in self.messages:
            text = message["content"]
            if message["role"] == "tool" and len(text) > _PROMPT_OUTPUT_CHARS:
                seen.append({**message, "content": "…" + text[-_PROMPT_OUTPUT_CHARS:]})
            else:
                seen.append(message)
        return seen

    def act(self, completion: Completion, native: bool = False) -> None:
        """Parse the reply, run its call, record the step, and decide whether the episode ends."""
        action = action_of(completion.text, completion.tool_calls, self.task, native)
        index = len(self.steps)
        step: dict[str, Any] = {
            "index": index,
            "kind": action.kind,
            "name": action.name,
            "arguments": json.dumps(action.arguments, sort_keys=True)
            if action.arguments is not None
            else None,
            "error": action.error,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "finish_reason": completion.finish_reason,
            "checked": False,
            "call": action.call,
        }
        if action.kind == "tool":
            assert action.name is not None and action.arguments is not None
            result = execute_call(self.episode, self.task, action.name, action.arguments)
            if result.status == "policy_violation":
                step["kind"] = "policy_violation"
            step.update(_result_fields(result))
            if action.name == "run_tests" and result.status != "policy_violation":
                step.update(self.check.record(result))
            elif self.check.needed(result.tree_hash):
                step.update(self.check.run())
        self._record_messages(index, completion.text, action, step)
        self.steps.append(step)
        self._decide(action)

    def _record_messages(self, index: int, text: str, action: Action, step: dict[str, Any]) -> None:
        if action.kind in ("tool", "invalid"):
            call_id = f"call_{index}"
            self.messages.append(
                {
                    "role": "assistant",
                    "content": action.text,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": action.name, "arguments": step["arguments"] or "{}"},
                        }
                    ],
                }
            )
            if step["kind"] == "invalid":
                content = f"error: {action.error}"
            elif step["kind"] == "policy_violation":
                content = f"refused: {step['error']}"
            else:
                content = f"exit code {step['exit_code']}\n{step['output_tail']}"
            self.messages.append(
                {"role": "tool", "tool_call_id": call_id, "name": action.name, "content": content}
            )
        elif action.kind == "final":
            self.messages.append({"role": "assistant", "content": action.answer or ""})
        else:
            self.messages.append({"role": "assistant", "content": text})
            self.messages.append({"role": "user", "content": f"error: {action.error}"})

    def _decide(self, action: Action) -> None:
        if not self.episode.alive:
            self.stop_reason = "sandbox_gone"
        elif action.kind == "final":
            if self.check.needed(self.steps[-1].get("tree_hash")) or self.check.last_hash is None:
                self.steps[-1].update(self.check.run())
            self.stop_reason = "final_answer"
        elif self.check.passed:
            self.stop_reason = "check_passed"
        elif len(self.steps) >= self.max_steps:
            self.stop_reason = "max_steps"
        elif self.episode.sandbox_s > self.task.time_limit_s:
            # the episode's own time in its sandbox: the engine's time depends on the machine and
            # on what shares its batches, and would make the same rollout end differently
            self.stop_reason = "time_limit"
        self.solved = self.check.passed if self.stop_reason else False

    def row(self, engine: Engine, config: RolloutConfig, policy: str) -> dict[str, Any]:
        """The episode as a sample record of kind ``agent`` (schema 2)."""
        counts = self.initial.get("tests_passed"), self.initial.get("tests_total")
        initial = (counts[0], counts[1]) if counts[0] is not None and counts[1] is not None else None
        rewards = step_rewards(self.steps, self.solved, initial, config.weights)
        for step, reward in zip(self.steps, rewards, strict=True):
            step["reward"] = reward
        parsed = sum(1 for s in self.steps if s["kind"] not in ("unparsable",))
        tools = tools_json(self.task.tools)
        prompt_tokens = sum(s["prompt_tokens"] for s in self.steps)
        completion_tokens = sum(s["completion_tokens"] for s in self.steps)
        return {
            "sample_id": sample_id("agent", self.messages, tools=tools),
            "batch": config.batch,
            "kind": "agent",
            "messages": self.messages,
            "tools": tools,
            "steps": self.steps,
            "outcome": {
                "task_id": self.task.id,
                "rollout": self.rollout,
                "solved": self.solved,
                "stop_reason": self.stop_reason,
                "n_steps": len(self.steps),
                "wall_s": round(time.perf_counter() - self.started, 3),
                "sandbox_s": round(self.episode.sandbox_s, 3),
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "parse_rate": parsed / len(self.steps) if self.steps else 0.0,
                "violations": sum(1 for s in self.steps if s["kind"] == "policy_violation"),
                "reward": round(sum(rewards), 6),
                "initial_hash": self.episode.initial_hash,
                "initial_check": self.initial,
                "task": self.task.to_json(),
                "policy": policy,
            },
            "provenance": {
                "method": "agent_rollout",
                "engine": engine.backend,
                "model": engine.model_id,
                "sampling_params": json.dumps(config.sampling(), sort_keys=True),
                "seed_task_id": self.task.id,
                "code_version": code_version(),
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "finish_reason": self.steps[-1]["finish_reason"] if self.steps else None,
            },
            "decisions": [],
        }


def _result_fields(result: StepResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "exit_code": result.exit_code,
        "duration_ms": result.duration_ms,
        "output_tail": result.output,
        "tree_hash": result.tree_hash,
        "error": result.detail if result.status == "policy_violation" else "",
    }


def _ask(engine: Engine, runs: Sequence[_Run], config: RolloutConfig) -> list[Completion]:
    """One completion per run, from one engine call (``chat_many``): every task's reply schema and
    tools in the same batches. Identical conversations (same task, same history) are one request
    with ``n`` completions, so rollouts that share a history still sample independently."""
    constrain = engine.supports_json_schema and not engine.native_tool_calls
    unique: dict[str, list[int]] = {}
    requests: dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None, list[dict[str, Any]]]] = {}
    for i, run in enumerate(runs):
        schema = reply_schema(run.task, final=bool(run.steps)) if constrain else None
        conversation = run.conversation()
        key = json.dumps([schema, run.task.tools, conversation], sort_keys=True)
        unique.setdefault(key, []).append(i)
        requests[key] = (conversation, schema, run.task.tools)
    asked = []
    for key, indices in unique.items():
        conversation, schema, tools = requests[key]
        params = SamplingParams(
            n=len(indices),
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            seed=config.seed,
            json_schema=schema,
            tools=[dict(t) for t in tools] if tools else None,
        )
        asked.append((conversation, params))
    answers: list[Completion | None] = [None] * len(runs)
    for indices, completions in zip(unique.values(), engine.chat_many(asked), strict=True):
        for j, i in enumerate(indices):
            answers[i] = completions[j]
    return [a for a in answers if a is not None]


def run_rollouts(
    tasks: Sequence[AgentTask],
    engine: Engine,
    pool: EpisodePool,
    config: RolloutConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Trajectory rows (see :mod:`~ptfactory.generators.agent.record`), tasks × rollouts of them."""
    config = config or RolloutConfig()
    say = progress or (lambda _: None)
    planned = [(task, k) for task in tasks for k in range(config.rollouts)]
    rows: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=max(pool.workers, 1)) as threads:
        for start in range(0, len(planned), pool.workers):
            wave = planned[start : start + pool.workers]

            def begin(item: tuple[AgentTask, int]) -> _Run:
                task, k = item
                budget = config.max_steps or task.max_steps
                episode = pool.open(task.files)
                try:
                    return _Run(task, k, episode, min(budget, task.max_steps))
                except BaseException:
                    episode.close()
                    raise

            runs = list(threads.map(begin, wave))
            try:
                for step in range(max(r.max_steps for r in runs)):
                    live = [r for r in runs if not r.done]
                    if not live:
                        break
                    completions = _ask(engine, live, config)
                    list(
                        threads.map(
                            lambda pair: pair[0].act(pair[1], engine.native_tool_calls),
                            zip(live, completions, strict=True),
                        )
                    )
                    solved = sum(1 for r in runs if r.solved)
                    say(
                        f"episodes {start + 1}-{start + len(wave)}/{len(planned)}: step {step + 1}, "
                        f"{sum(1 for r in runs if not r.done)} live, {solved} solved"
                    )
            finally:
                list(threads.map(lambda r: r.episode.close(), runs))
            policy = json.dumps({"mode": pool.policy.mode, "rules": list(pool.policy.rules)})
            rows.extend(r.row(engine, config, policy) for r in runs)
    return rows
