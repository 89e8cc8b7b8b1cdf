"""Turning a code sample into one program: the solution, its tests, and ``check(entry_point)``."""

from __future__ import annotations

import re

__all__ = ["extract_solution", "program"]

_FENCE = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.S)


def _stub(prompt: str) -> str:
    """The function stub in a prompt (the code block of a templated prompt, else the prompt itself)."""
    blocks: list[str] = _FENCE.findall(prompt)
    return blocks[0] if blocks else prompt


def extract_solution(prompt: str, response: str, entry_point: str) -> str:
    """The code to test, from a model's reply or a HumanEval-style completion.

    A fenced block that defines ``entry_point`` wins; a reply that is only a function body (a
    HumanEval completion) is appended to the prompt's stub, as HumanEval does.
    """
    blocks: list[str] = _FENCE.findall(response) or [response]
    defining = [b for b in blocks if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", b, re.M)]
    if defining:
        return defining[0]
    return _stub(prompt).rstrip("\n") + "\n" + blocks[0]


def program(solution: str, tests: str, entry_point: str | None) -> str:
    """One file that defines the solution, the tests, and calls ``check`` on the entry point."""
    call = f"\n\ncheck({entry_point})\n" if entry_point else "\n"
    return f"{solution}\n\n{tests}{call}"
