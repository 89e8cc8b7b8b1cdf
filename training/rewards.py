"""GRPO rewards: the factory's verifiers as TRL reward functions.

TRL's ``GRPOTrainer`` calls each reward function with ``prompts``, ``completions`` and every
dataset column as keyword lists aligned with the completions; an ``rl`` row's verifiable task
travels in the ``ptf_task`` column (JSON: ``kind``, ``reference``, ``tests``, ``entry_point``;
:func:`task_column`). Each reward is a picklable class with a ``__name__`` (TRL logs
``rewards/<name>/mean``):

=====================  =====================================================================
reward                 scores with
=====================  =====================================================================
``code_reward``        the tests in the sandbox (:class:`CodeVerifier`, ``infra_error="fail"``):
                       the sandbox is built lazily in the process that scores, never the host
``answer_reward``      math-verify in bounded worker processes (:class:`AnswerVerifier`)
``procedural_reward``  the reasoning-gym family's scorer (:class:`ProceduralVerifier`); 1.0 only
``constraints_reward`` IFEval's checks (:class:`ConstraintsVerifier`)
``format_reward``      the answer format the task asks for: an ``<answer>`` block (procedural),
                       a marked final answer (answer), a code block defining the entry point
=====================  =====================================================================

Binary: 1.0 pass, 0.0 otherwise. ``None`` where the reward does not apply to a row (TRL treats it
as NaN and sums with nansum; a row no function scores gets advantage 0). A verifier that applies
but cannot decide (a crashed or timed-out solution, a scorer that hung) gives 0.0: a reward is
never an abstention. Part credit is not paid (a partial verdict scores 0).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.programs import code_blocks
from ptfactory.filters.verify import (
    AnswerVerifier,
    CodeVerifier,
    ConstraintsVerifier,
    ProceduralVerifier,
    Verdict,
    Verifier,
    extract,
)
from ptfactory.filters.verify.procedural import tag_answer

__all__ = [
    "AnswerReward",
    "CodeReward",
    "ConstraintsReward",
    "FormatReward",
    "ProceduralReward",
    "VerifierReward",
    "default_rewards",
    "reward_of",
    "task_column",
]


def task_column(row: Mapping[str, Any]) -> str:
    """The ``ptf_task`` column of an rl row: what the verifiers need, as JSON."""
    tests = row.get("tests") if row.get("entry_point") else None
    kind = "code" if tests else "sft"
    return json.dumps(
        {
            "kind": kind,
            "reference": row.get("reference"),
            "tests": tests,
            "entry_point": row.get("entry_point"),
        },
        sort_keys=True,
    )


def _text(completion: Any) -> str:
    """A completion as TRL passes it: text, or a conversational list of turns."""
    if isinstance(completion, str):
        return completion
    turns = [t for t in completion or [] if isinstance(t, Mapping)]
    return "".join(str(t.get("content") or "") for t in turns if t.get("role", "assistant") == "assistant")


def _prompt_turns(prompt: Any) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{"role": t["role"], "content": t["content"]} for t in prompt]


def _rows(prompts: Sequence[Any], completions: Sequence[Any], tasks: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for prompt, completion, task in zip(prompts, completions, tasks, strict=True):
        spec = json.loads(task)
        messages = [*_prompt_turns(prompt), {"role": "assistant", "content": _text(completion)}]
        rows.append({**spec, "messages": messages})
    return rows


def reward_of(verdict: Verdict) -> float | None:
    """1.0 / 0.0; None only where the verifier does not apply; every other abstention 0.0."""
    if verdict.verdict == "abstain" and verdict.reason == "not_applicable":
        return None
    return 1.0 if verdict.passed else 0.0


class VerifierReward:
    """A verifier as a reward function; the verifier (and its pools) is built on first call, in
    the process that calls, and dropped when pickled."""

    name: ClassVar[str] = "verifier_reward"

    def __init__(self) -> None:
        self.__name__ = self.name
        self._verifier: Verifier | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_verifier": None}

    def build(self) -> Verifier:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        return {"name": self.name}

    @property
    def verifier(self) -> Verifier:
        if self._verifier is None:
            self._verifier = self.build()
        return self._verifier

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], ptf_task: Sequence[str], **_: Any
    ) -> list[float | None]:
        rows = _rows(prompts, completions, ptf_task)
        verifier = self.verifier
        chosen = [i for i, row in enumerate(rows) if verifier.applies(row)]
        out: list[float | None] = [None] * len(rows)
        if chosen:
            for index, verdict in zip(chosen, verifier.verify_many([rows[i] for i in chosen]), strict=True):
                out[index] = reward_of(verdict)
        return out

    def close(self) -> None:
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None


class AnswerReward(VerifierReward):
    name = "answer_reward"

    def build(self) -> Verifier:
        return AnswerVerifier()


class ProceduralReward(VerifierReward):
    name = "procedural_reward"

    def build(self) -> Verifier:
        return ProceduralVerifier()


class ConstraintsReward(VerifierReward):
    name = "constraints_reward"

    def build(self) -> Verifier:
        return ConstraintsVerifier()


class CodeReward(VerifierReward):
    """``limits``, ``workers`` and ``backend`` say which sandbox to open (factory.yaml's
    ``sandbox``); it opens on the first call, in that process."""

    name = "code_reward"

    def __init__(
        self, limits: Limits | None = None, workers: int | None = None, backend: str = "auto"
    ) -> None:
        super().__init__()
        self.limits = limits or Limits()
        self.workers = workers
        self.backend = backend
        self._sandbox: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_sandbox": None}

    def config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "limits": self.limits.to_dict(),
            "workers": self.workers,
            "backend": self.backend,
        }

    def build(self) -> Verifier:
        from ptfactory.filters.execution import open_sandbox

        self._sandbox = open_sandbox(self.limits, self.workers, self.backend)
        return CodeVerifier(self._sandbox, self.limits, infra_error="fail", use_recorded=False)

    def close(self) -> None:
        super().close()
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


class FormatReward:
    """1.0 when the completion is in the form its task asks for (module docstring), else 0.0;
    None for tasks with no answer format (constraints)."""

    name: ClassVar[str] = "format_reward"

    def __init__(self) -> None:
        self.__name__ = self.name

    def config(self) -> dict[str, Any]:
        return {"name": self.name}

    @staticmethod
    def _one(task: Mapping[str, Any], text: str) -> float | None:
        reference = task.get("reference") or {}
        if task.get("tests") and task.get("entry_point"):
            pattern = rf"^\s*def\s+{re.escape(str(task['entry_point']))}\s*\("
            return float(any(re.search(pattern, block, re.M) for block in code_blocks(text)))
        if reference.get("family"):
            return float(tag_answer(text) is not None)
        if reference.get("answer"):
            return float(extract(text, fallback=False) is not None)
        return None

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], ptf_task: Sequence[str], **_: Any
    ) -> list[float | None]:
        return [self._one(json.loads(t), _text(c)) for c, t in zip(completions, ptf_task, strict=True)]

    def close(self) -> None:
        """Holds nothing."""


def default_rewards(
    kinds: set[str], limits: Limits | None = None, workers: int | None = None, backend: str = "auto"
) -> list[Any]:
    """The verifier rewards the dataset's task kinds need, then the format reward."""
    chosen: list[Any] = []
    if "code" in kinds:
        chosen.append(CodeReward(limits, workers, backend))
    if "answer" in kinds:
        chosen.append(AnswerReward())
    if "procedural" in kinds:
        chosen.append(ProceduralReward())
    if "constraints" in kinds:
        chosen.append(ConstraintsReward())
    chosen.append(FormatReward())
    return chosen
