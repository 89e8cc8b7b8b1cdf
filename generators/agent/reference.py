"""Reference solutions as a policy: an engine that answers each task's conversation with the next
call of the task's ``solution``, then a final answer. Reference episodes run through the same
rollout, record, replay and check as a model's, so a reference that does not solve its task in
the sandbox shows it (and is dropped like any unsolved episode)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.generators.agent.tasks import AgentTask

__all__ = ["REFERENCE_BACKEND", "ReferenceEngine"]

REFERENCE_BACKEND = "reference"


class ReferenceEngine(Engine):
    backend = REFERENCE_BACKEND

    def __init__(self, tasks: Sequence[AgentTask]) -> None:
        super().__init__(model_id="reference-solutions")
        self._calls = {t.instruction: t.solution or [] for t in tasks}

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        replies = []
        for conversation in conversations:
            task = next(m["content"] for m in conversation if m["role"] == "user")
            calls: list[dict[str, Any]] = self._calls.get(task, [])
            done = sum(1 for m in conversation if m["role"] == "assistant")
            text = json.dumps(calls[done]) if done < len(calls) else '{"final_answer": "done"}'
            replies.append([Completion(text, 0, 0)] * params.n)
        return replies
