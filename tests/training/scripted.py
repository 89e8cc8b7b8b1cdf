"""An engine that answers from a script: the model is not what these tests are about (the tasks,
the verifiers, the sandbox and the report are, all real); each prompt's answers are chosen by a
phrase it contains, rollout i taking answer i (cycling)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams

__all__ = ["ScriptedEngine"]


@dataclass
class ScriptedEngine(Engine):
    script: dict[str, list[str]] = field(default_factory=dict)
    backend = "scripted"

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        out = []
        for conversation in conversations:
            text = str(conversation[-1]["content"])
            key = next((k for k in self.script if k in text), None)
            if key is None:
                raise AssertionError(f"no scripted answer for {text[:80]!r}")
            answers = self.script[key]
            out.append([Completion(answers[i % len(answers)], 20, 8) for i in range(params.n)])
        return out
