"""The ``agent:`` section of factory.yaml: which tasks the factory rolls out, how, and how much it replays."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field

from ptfactory.filters.execution.commands import DEFAULT_DENY, CommandPolicy
from ptfactory.section import Section

__all__ = ["LIVE_EPISODES", "AgentSection"]

LIVE_EPISODES = 8  # the default cap on episodes live at once (each holds a container)


class AgentSection(Section):
    tasks: list[str] = Field(
        default_factory=list,
        description="kind-agent task files (JSONL), relative to factory.yaml; every batch rolls them out "
        "(no file: the agent stages pass through empty)",
    )
    rollouts: int = Field(2, ge=1, le=64, description="episodes per task (difficulty = 1 - solve rate)")
    max_steps: int | None = Field(None, ge=1, description="caps every task's own step budget")
    max_tokens: int = Field(256, gt=0, description="tokens per reply")
    temperature: float = Field(0.7, ge=0, le=2)
    seed: int = 0
    workers: int | None = Field(
        None,
        gt=0,
        description=(
            "live episodes (containers) at once; default: every episode of the batch, up to "
            f"{LIVE_EPISODES} (and at least sandbox.workers)"
        ),
    )
    policy: Literal["deny", "allow"] = Field(
        "deny", description="deny: the default refusals plus `commands`; allow: only `commands` run"
    )
    commands: list[str] = Field(default_factory=list, description="e.g. 'pip install', 'git push'")
    replay_sample: float = Field(
        1.0, ge=0, le=1, description="share of each batch's trajectories re-executed in fresh sandboxes"
    )

    def live_episodes(self, episodes: int, sandbox_workers: int | None) -> int:
        """Episodes live at once: ``workers`` when set; else all of them, up to ``LIVE_EPISODES``.
        A live episode mostly waits for the model with its container idle, and every live episode's
        step is in one batched engine call: three tasks' rollouts live together take one call a
        step, where waves of two (the cores) took three."""
        if self.workers:
            return self.workers
        return max(min(episodes, LIVE_EPISODES), sandbox_workers or os.cpu_count() or 1)

    def command_policy(self) -> CommandPolicy:
        if self.policy == "allow":
            return CommandPolicy("allow", tuple(self.commands))
        return CommandPolicy("deny", (*DEFAULT_DENY, *self.commands))
