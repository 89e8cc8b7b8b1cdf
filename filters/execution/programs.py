"""Turning a code sample into one program: the counting harness, the solution, its tests, and
``check(entry_point)``; and reading the assertion counts back from what the run wrote."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from dataclasses import replace
from pathlib import Path

from ptfactory.filters.execution.limits import ExecResult
from ptfactory.filters.execution.solutions import (
    MISSING_ENTRY_POINT,
    code_blocks,
    entry_name,
    extract_solution,
    infer_entry_point,
)

__all__ = [
    "ASSERTIONS_MARK",
    "code_blocks",
    "entry_name",
    "extract_solution",
    "graded",
    "infer_entry_point",
    "program",
]

# The harness's source (its test runners, then its core), sent into the sandbox as the top of every
# program. The host never imports it (its `exec` lines must run only in the sandbox): even the mark
# it prints is read from its text.
_HERE = Path(__file__).parent
_HARNESS = "from __future__ import annotations\n" + "\n".join(
    (_HERE / name).read_text().replace("from __future__ import annotations\n", "")
    for name in (
        "harness_pytest.py",
        "harness_units.py",
        "harness_fixtures.py",
        "harness_xunit.py",
        "harness_honest.py",
        "harness_numbers.py",
        "harness_guard.py",
        "harness.py",
    )
)
_MARK = re.search(r'^ASSERTIONS_MARK = "([^"]+)"$', _HARNESS, re.M)
if _MARK is None:  # pragma: no cover - a broken install; fail at import, not on the first graded run
    raise ImportError("filters/execution/harness.py no longer defines ASSERTIONS_MARK as a string literal")
ASSERTIONS_MARK = _MARK.group(1)
# the line and the newline the harness writes before it (so the program's own output comes back as
# it was): the nonce, passed, total and why the run abstains (nothing when it does not)
_COUNTS = re.compile(rf"\n?^{re.escape(ASSERTIONS_MARK)} (\S+) (\d+) (\d+)(?: (\S+))?$\n?", re.M)
# This process's key: a run's nonce is a digest of its program and a MAC of that digest, so only a
# line the harness wrote from program.py (deleted before the solution loads) carries a valid one.
_KEY = os.urandom(32)


def _mac(digest: str) -> str:
    return hmac.new(_KEY, digest.encode(), hashlib.sha256).hexdigest()[:24]


def _nonce(solution: str, tests: str, entry_point: str | None) -> str:
    digest = hashlib.sha256(repr((solution, tests, entry_point)).encode()).hexdigest()[:16]
    return f"{digest}-{_mac(digest)}"


def _valid(nonce: str) -> bool:
    digest, _, mac = nonce.partition("-")
    return hmac.compare_digest(mac, _mac(digest))


def program(solution: str, tests: str, entry_point: str | None) -> str:
    """One file: the harness, then a call that runs the solution, its tests (each assert counted,
    none stopping the run) and ``check(entry_point)`` when the tests are HumanEval's.

    The solution and the tests travel as string literals (``repr``), so nothing they contain is
    code until the harness compiles it inside the sandbox; the entry point as :func:`entry_name`
    reads it. The same inputs give the same program in one process (a cache may key on it).
    A reply without its entry point where the prompt's is written out (``MISSING_ENTRY_POINT``)
    makes a run that abstains (``unsupported:missing_entry_point``) without running anything.
    """
    entry = entry_name(entry_point) or None
    nonce = _nonce(solution, tests, entry)
    code = None if solution == MISSING_ENTRY_POINT else solution  # None: the harness abstains
    return f"{_HARNESS}\n\nrun({code!r}, {tests!r}, {entry!r}, {nonce!r})\n"


def graded(result: ExecResult) -> ExecResult:
    """``result`` with the harness's assertion counts (None when it wrote none: the run was killed
    by a timeout, OOM or output flood before the harness could report) and without its count line.
    Only a count line with this process's nonce counts: one the solution printed is its output.
    A run that exited cleanly without a valid count line never ran its tests: it is ``failed``.
    A run the harness says abstains (no assertion ran, a third-party module missing) keeps its
    ``failed`` status with ``detail`` saying ``abstain: <why>``."""
    found = [m for m in _COUNTS.finditer(result.stdout_tail) if _valid(m.group(1))]
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
    last = found[-1]
    why = last.group(4)
    stdout = result.stdout_tail[: last.start()] + result.stdout_tail[last.end() :]
    return replace(
        result,
        stdout_tail=stdout,
        assertions_passed=int(last.group(2)),
        assertions_total=int(last.group(3)),
        detail=f"abstain: {why}" if why else result.detail,
    )
