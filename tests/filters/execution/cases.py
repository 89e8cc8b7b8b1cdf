"""Rows for the code verifier and a batch of named cases judged at once (a sandbox run costs
seconds): what the harness tests of this folder share."""

from __future__ import annotations

from typing import Any

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.verify import CodeVerifier

__all__ = ["code_row", "judged"]


def code_row(reply: str, tests: str, entry: str, prompt: str = "Write it.") -> dict[str, Any]:
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]
    return {"kind": "code", "messages": messages, "tests": tests, "entry_point": entry}


def judged(sandbox: DockerSandbox, cases: list[tuple[str, dict[str, Any], str]]) -> dict[str, Any]:
    """Each case's verdict (by name), asserting every expected verdict."""
    verdicts = CodeVerifier(sandbox).verify_many([r for _, r, _ in cases])
    got = {name: v.verdict for (name, _, _), v in zip(cases, verdicts, strict=True)}
    assert got == {name: expected for name, _, expected in cases}
    return {name: v for (name, _, _), v in zip(cases, verdicts, strict=True)}
