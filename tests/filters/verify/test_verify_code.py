"""The code verifier through the real Docker sandbox: the execution harness grades the response's
solution; failed assertions are named; a recorded execution is reused; a sandbox fault abstains in
the factory and scores 0 in a reward."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import ExecResult, Limits
from ptfactory.filters.verify import CodeVerifier

TESTS = (
    "def check(candidate):\n"
    "    assert candidate(1) == 2\n"
    "    assert candidate(2) == 3\n"
    "    assert candidate(3) == 4, 'three'\n"
)
PROMPT = 'def inc(x):\n    """Add one to x."""\n'


def row(response: str, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": PROMPT}, {"role": "assistant", "content": response}]
    return {"kind": "code", "messages": messages, "tests": TESTS, "entry_point": "inc", **extra}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    with DockerSandbox(Limits(timeout_s=3, memory_mb=128, pids=32), workers=2) as box:
        yield box


@pytest.mark.integration
def test_graded_in_the_sandbox(sandbox: DockerSandbox) -> None:
    verifier = CodeVerifier(sandbox)
    right, wrong, looping = verifier.verify_many(
        [
            row("```python\ndef inc(x):\n    return x + 1\n```"),
            row("    return x + 1 if x < 3 else 0\n"),  # a HumanEval-style body: appended to the stub
            row("def inc(x):\n    while True:\n        pass\n"),
        ]
    )
    assert (right.verdict, right.reason, right.score, right.partial) == ("pass", "tests_passed", 1.0, 1.0)
    assert (right.evidence["assertions_passed"], right.evidence["assertions_total"]) == (3, 3)
    assert (wrong.verdict, wrong.reason, wrong.final) == ("fail", "execution_failed", True)
    assert wrong.partial == pytest.approx(2 / 3)
    assert wrong.evidence["failed_checks"] == [
        "tests.py:4: assert candidate(3) == 4, 'three' (assertion failed)"
    ]
    assert (looping.verdict, looping.reason) == ("fail", "execution_timeout")  # the solution's doing


@pytest.mark.integration
def test_top_level_asserts_need_no_check_function(sandbox: DockerSandbox) -> None:
    # MBPP-style tests call the function by name and define no check(candidate): the right solution
    # passes on its asserts alone (it failed with KeyError: 'check' before), the wrong one is named
    tests = "assert inc(1) == 2\nassert inc(5) == 6\n"
    right, wrong = CodeVerifier(sandbox).verify_many(
        [
            row("```python\ndef inc(x):\n    return x + 1\n```", tests=tests),
            row("```python\ndef inc(x):\n    return x + 2\n```", tests=tests),
        ]
    )
    assert (right.verdict, right.reason) == ("pass", "tests_passed"), right.evidence["stderr_tail"]
    assert (right.evidence["assertions_passed"], right.evidence["assertions_total"]) == (2, 2)
    assert (wrong.verdict, wrong.partial) == ("fail", 0.0)
    assert wrong.evidence["failed_checks"] == [
        "tests.py:1: assert inc(1) == 2 (assertion failed)",
        "tests.py:2: assert inc(5) == 6 (assertion failed)",
    ]


@pytest.mark.integration
def test_a_recorded_execution_is_not_run_again(sandbox: DockerSandbox) -> None:
    recorded = {"status": "failed", "exit_code": 1, "stderr_tail": "tests.py:2: raised ValueError: no\n",
                "assertions_passed": 2, "assertions_total": 3}  # fmt: skip
    # the response passes, but the execution stage recorded a failure: the record decides
    verdict = CodeVerifier(sandbox).verify(
        row("def inc(x):\n    return x + 1\n", scores={"execution": recorded})
    )
    assert verdict.verdict == "fail" and verdict.evidence["recorded"] is True
    assert verdict.evidence["failed_checks"] == [
        "tests.py:2: assert candidate(1) == 2 (raised ValueError: no)"
    ]
    fresh = CodeVerifier(sandbox, use_recorded=False)
    assert fresh.verify(row("def inc(x):\n    return x + 1\n", scores={"execution": recorded})).passed


class BrokenSandbox(Sandbox):
    """A sandbox whose runner dies on every job (pure logic: the verdict policy)."""

    backend = "broken"

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        return ExecResult("sandbox_error", None, 5.0, detail="the container went away")


def test_a_sandbox_fault_abstains_in_the_factory_and_fails_in_a_reward() -> None:
    factory = CodeVerifier(BrokenSandbox(workers=1)).verify(row("def inc(x):\n    return x + 1\n"))
    assert (factory.verdict, factory.reason, factory.score) == ("abstain", "sandbox_error", None)
    assert factory.evidence["detail"] == "the container went away"
    reward = CodeVerifier(BrokenSandbox(workers=1), infra_error="fail").verify(row("def inc(x): return 1\n"))
    assert (reward.verdict, reward.score) == ("fail", 0.0)


def test_rows_without_tests_do_not_apply() -> None:
    verifier = CodeVerifier(BrokenSandbox(workers=1))
    plain = {
        "kind": "sft",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}],
    }
    assert not verifier.applies(plain) and verifier.verify(plain).reason == "not_applicable"
    assert verifier.verify(row("")).reason == "no_response"
