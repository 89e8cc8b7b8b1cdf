"""The code verifier: the response's solution against the row's tests, graded in the sandbox.

The execution stage's own harness (filters/execution: ``extract_solution``, ``program``, ``graded``;
one ``Sandbox.run_many`` for the whole batch, or what the execution stage already recorded in
``scores.execution``): each assert of the tests is counted, a failing one
does not stop the run. Applies to a row with ``tests`` and ``entry_point`` and a response.

=======================================  ====================================================
status in the sandbox                    verdict (reason)
=======================================  ====================================================
passed                                   pass (``tests_passed``)
failed, timeout, oom, output_limit       fail (``execution_<status>``): the solution's doing
sandbox_error                            ``infra_error="abstain"`` (the factory's default):
                                         abstain (``sandbox_error``) — the difficulty stage
                                         decides with a known-good control program whether it
                                         was the sandbox; ``"fail"`` (rewards): fail
failed, the harness said                 abstain (``no_assertions``): the tests ran and checked
``no_assertions``                        nothing (they only print), whichever the reply
failed, the harness said                 a well-known third-party package the sandbox image
``missing_module:NAME``                  lacks (numpy): abstain (``missing_module``) as a
                                         sandbox fault would, fail where ``infra_error="fail"``
failed, the harness said                 a pytest feature the sandbox's stand-in lacks
``unsupported:pytest.NAME``              (fixtures, skip marks): abstain
                                         (``unsupported_test_feature``)
failed, the harness said                 the reply defines no entry point where the prompt's
``unsupported:missing_entry_point``      has a real body: abstain (``missing_entry_point``), never
                                         a run of the prompt's function
=======================================  ====================================================

A sandbox that cannot work at all raises :class:`~ptfactory.errors.SandboxError`: that is no row's
verdict. Evidence: status, exit code, assertions passed/total, the failed checks (``tests.py:LINE``
with the assert's source and why it failed), the tails of stdout/stderr and the sandbox's detail.
``partial`` is the share of assertions that held.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.limits import ExecResult, Limits
from ptfactory.filters.execution.programs import extract_solution, graded, program
from ptfactory.filters.verify.base import Verdict, Verifier

__all__ = ["CodeVerifier", "failed_checks"]

_FAILED_LINE = re.compile(r"^tests\.py:(\d+): (.+)$", re.M)
MAX_FAILED = 20  # an assert in a loop fails once per pass: the first few say enough


def failed_checks(tests: str, stderr: str) -> list[str]:
    """``tests.py:LINE: <the assert's source> (<why>)`` for each failed assertion the harness
    reported, each line once, at most MAX_FAILED."""
    lines = tests.splitlines()
    seen: list[str] = []
    for number, why in _FAILED_LINE.findall(stderr):
        index = int(number) - 1
        source = lines[index].strip() if 0 <= index < len(lines) else ""
        entry = f"tests.py:{number}: {source} ({why})" if source else f"tests.py:{number}: {why}"
        if entry not in seen:
            seen.append(entry)
        if len(seen) >= MAX_FAILED:
            break
    return seen


def _recorded(execution: Mapping[str, Any]) -> ExecResult:
    """The execution stage's ``scores.execution`` as the result it recorded."""
    return ExecResult(
        status=execution["status"],
        exit_code=execution.get("exit_code"),
        duration_ms=execution.get("duration_ms") or 0.0,
        stdout_tail=execution.get("stdout_tail") or "",
        stderr_tail=execution.get("stderr_tail") or "",
        assertions_passed=execution.get("assertions_passed"),
        assertions_total=execution.get("assertions_total"),
    )


class CodeVerifier(Verifier):
    """``use_recorded``: a row the execution stage already ran (``scores.execution``) is decided from
    that record, not run again (evidence ``recorded: true``); rows without one run in ``sandbox``."""

    kind = "code"

    def __init__(
        self,
        sandbox: Sandbox,
        limits: Limits | None = None,
        infra_error: Literal["abstain", "fail"] = "abstain",
        use_recorded: bool = True,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        self.sandbox = sandbox
        self.limits = limits
        self.infra_error = infra_error
        self.use_recorded = use_recorded

    def applies(self, row: Mapping[str, Any]) -> bool:
        return bool(row.get("tests")) and bool(row.get("entry_point"))

    def verify_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(rows)
        jobs: list[tuple[int, Job]] = []
        for index, row in enumerate(rows):
            if not self.applies(row):
                verdicts[index] = self.not_applicable()
                continue
            response = self.response(row)
            if not response.strip():
                verdicts[index] = self.abstain("no_response")
                continue
            recorded = ((row.get("scores") or {}).get("execution") or {}) if self.use_recorded else {}
            if recorded.get("status"):
                verdicts[index] = self._decide(_recorded(recorded), str(row["tests"]), recorded=True)
                continue
            solution = extract_solution(self.prompt(row), response, str(row["entry_point"]))
            text = program(solution, str(row["tests"]), str(row["entry_point"]))
            jobs.append((index, Job({"program.py": text})))
        results = self.sandbox.run_many([job for _, job in jobs], self.limits) if jobs else []
        for (index, _), result in zip(jobs, results, strict=True):
            verdicts[index] = self._decide(graded(result), str(rows[index]["tests"]))
        return [v if v is not None else self.abstain("lost") for v in verdicts]

    def _decide(self, result: ExecResult, tests: str, recorded: bool = False) -> Verdict:
        total = result.assertions_total
        held = (result.assertions_passed or 0) / total if total else None
        evidence = {
            "status": result.status,
            "exit_code": result.exit_code,
            "assertions_passed": result.assertions_passed,
            "assertions_total": total,
            "failed_checks": failed_checks(tests, result.stderr_tail),
            "stdout_tail": result.stdout_tail[-500:],
            "stderr_tail": result.stderr_tail[-1000:],
            "detail": result.detail,
            "duration_ms": round(result.duration_ms, 1),
            "recorded": recorded,
        }
        abstained = result.detail.startswith("abstain: ") and result.status == "failed"
        why = result.detail.removeprefix("abstain: ") if abstained else ""
        if why == "no_assertions":  # the tests ran but checked nothing: no verdict either way
            return self.abstain("no_assertions", **evidence)
        if why == "unsupported:missing_entry_point":  # the prompt defines it; the reply does not
            return self.abstain("missing_entry_point", **evidence)
        if why.startswith("unsupported:"):  # a pytest feature the sandbox's stand-in lacks
            return self.abstain("unsupported_test_feature", **evidence)
        if why.startswith("missing_module:") and self.infra_error == "abstain":
            return self.abstain("missing_module", **evidence)  # the image's limit, not the reply's
        if result.status == "passed":
            return self.verdict("pass", "tests_passed", partial=held, **evidence)
        if result.status == "sandbox_error" and self.infra_error == "abstain":
            return self.abstain("sandbox_error", **evidence)
        return self.verdict("fail", f"execution_{result.status}", partial=held or 0.0, **evidence)
