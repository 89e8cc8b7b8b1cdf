"""Turning a code sample into one program: the counting harness, the solution, its tests, and
``check(entry_point)``; and reading the assertion counts back from what the run wrote."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from ptfactory.filters.execution.limits import ExecResult

__all__ = ["ASSERTIONS_MARK", "code_blocks", "extract_solution", "graded", "infer_entry_point", "program"]

# a top-level import statement (not prose that starts with "from the ...")
_IMPORT = re.compile(
    r"^(?:from\s+[\w.]+\s+import\s+\S.*|import\s+[\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*\s*)$"
)
# a fenced Python block, its tag in any case and spacing ("```python", "```Python3", "``` py"), or an
# untagged one (the one home of this pattern: generation and the rewards read code through it)
_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.S | re.I)
# a block defines the entry point: a def (async too), a class, or a top-level assignment
_DEFINES = r"^\s*(?:async\s+)?def\s+{name}\s*\(|^\s*class\s+{name}\b|^{name}\s*="
# The harness's source, sent into the sandbox as the top of every program. The host never imports
# it (its `exec` lines must run only in the sandbox): even the mark it prints is read from its text.
_HARNESS = (Path(__file__).parent / "harness.py").read_text()
_MARK = re.search(r'^ASSERTIONS_MARK = "([^"]+)"$', _HARNESS, re.M)
if _MARK is None:  # pragma: no cover - a broken install; fail at import, not on the first graded run
    raise ImportError("filters/execution/harness.py no longer defines ASSERTIONS_MARK as a string literal")
ASSERTIONS_MARK = _MARK.group(1)
# the line and the newline the harness writes before it (so the program's own output comes back as it was)
_COUNTS = re.compile(rf"\n?^{re.escape(ASSERTIONS_MARK)} (\d+) (\d+)$\n?", re.M)


def code_blocks(text: str) -> list[str]:
    """The fenced Python (or untagged) code blocks of a text, in order (``_FENCE``)."""
    blocks: list[str] = _FENCE.findall(text)
    return blocks


def _stub(prompt: str) -> str:
    """The function stub in a prompt (the code block of a templated prompt, else the prompt itself)."""
    blocks: list[str] = code_blocks(prompt)
    return blocks[0] if blocks else prompt


def extract_solution(prompt: str, response: str, entry_point: str) -> str:
    """The code to test, from a model's reply or a HumanEval-style completion.

    A fenced block that defines ``entry_point`` wins, after the stub's top-level imports it lacks
    (a reply that restates ``def f(xs: List[int])`` without the prompt's ``from typing import List``
    is run as HumanEval runs prompt + completion); a reply that is only a function body (a
    HumanEval completion) is appended to the prompt's stub, as HumanEval does. A block defines the
    entry point with a ``def`` (``async`` too), a ``class`` or a top-level assignment
    (``add = lambda a, b: a + b``).
    """
    blocks: list[str] = code_blocks(response) or [response]
    defines = _DEFINES.format(name=re.escape(entry_point))
    defining = [b for b in blocks if re.search(defines, b, re.M)]
    if defining:
        imports = [
            line for line in _stub(prompt).splitlines() if _IMPORT.match(line) and line not in defining[0]
        ]
        return "\n".join([*imports, defining[0]]) if imports else defining[0]
    return _stub(prompt).rstrip("\n") + "\n" + blocks[0]


# a top-level function or class
_DEF = re.compile(r"^(?:async\s+)?(?:def\s+(\w+)\s*\(|class\s+(\w+)\b)", re.M)


def _names(code: str) -> list[str]:
    """The top-level functions and classes ``code`` defines, in order."""
    return [function or cls for function, cls in _DEF.findall(code)]


def infer_entry_point(prompt: str, response: str) -> str | None:
    """The function a row's tests call when the row does not name it: the one top-level function
    (or class) the reply's code defines, else the last one the prompt's stub defines (a HumanEval
    prompt ends with the function to complete); None when neither settles it."""
    blocks: list[str] = code_blocks(response) or [response]
    defined = list(dict.fromkeys(name for block in blocks for name in _names(block)))
    if len(defined) == 1:
        return defined[0]
    stub = _names(_stub(prompt))
    if stub and (not defined or stub[-1] in defined):
        return stub[-1]
    return None


def program(solution: str, tests: str, entry_point: str | None) -> str:
    """One file: the harness, then a call that runs the solution, its tests (each assert counted,
    none stopping the run) and ``check(entry_point)`` when there is an entry point and the tests
    define ``check`` (MBPP-style tests, top-level asserts, have run by then).

    The solution and the tests travel as string literals (``repr``), so nothing they contain is
    code until the harness compiles it inside the sandbox.
    """
    return f"{_HARNESS}\n\nrun({solution!r}, {tests!r}, {entry_point!r})\n"


def graded(result: ExecResult) -> ExecResult:
    """``result`` with the harness's assertion counts (None when it wrote none: the run was killed
    by a timeout, OOM or output flood before the harness could report) and without its count line.
    A run that exited cleanly without the counts never ran its tests: it is ``failed``."""
    found = _COUNTS.findall(result.stdout_tail)
    if not found:
        if result.status == "passed":
            # The harness always writes its counts before it exits; a clean exit without them is a
            # program that left before its tests ran (``os._exit(0)`` in the solution): a failure.
            return replace(
                result,
                status="failed",
                detail="the program exited before the harness reported its tests (an early exit)",
            )
        return result
    passed, total = found[-1]
    return replace(
        result,
        stdout_tail=_COUNTS.sub("", result.stdout_tail),
        assertions_passed=int(passed),
        assertions_total=int(total),
    )
