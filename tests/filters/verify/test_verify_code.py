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
def test_a_main_block_a_class_and_an_import_of_the_solution(sandbox: DockerSandbox) -> None:
    # Right solutions that failed before: a reply's `if __name__ == "__main__":` demo read input()
    # (EOFError: the solution ran as __main__); a class entry point was not seen as defined, so
    # the prompt's prose was prepended to it (SyntaxError); tests that `from solution import fib`
    # found no module. The wrong twin of each still fails.
    main = "```python\ndef inc(x):\n    return x + {k}\n\nif __name__ == '__main__':\n    print(inc(int(input())))\n```"
    stack = (
        "```python\nclass Stack:\n    def __init__(self):\n        self.items = []\n"
        "    def push(self, x):\n        self.items.append(x)\n"
        "    def pop(self):\n        return self.items.{how}\n```"
    )
    stack_tests = (
        "def check(candidate):\n    s = candidate()\n    s.push(1)\n    s.push(2)\n    assert s.pop() == 2\n"
    )
    fib = "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a{off}\n"
    fib_tests = "from solution import fib\n\ndef test_fib():\n    assert fib(10) == 55\n"
    # and a demo line at the top level that reads input(): there is none in the sandbox (EOFError)
    demo = "```python\ndef inc(x):\n    return x + {k}\n\nprint(inc(int(input())))\n```"
    # and LeetCode's form: the entry point a method of class Solution
    leet = "```python\nclass Solution:\n    def inc(self, x):\n        return x + {k}\n```"
    rows = [
        row(leet.format(k=1)),
        row(leet.format(k=2)),
        row(main.format(k=1)),
        row(main.format(k=2)),
        row(demo.format(k=1)),
        row(demo.format(k=2)),
        {**row(stack.format(how="pop()")), "tests": stack_tests, "entry_point": "Stack"},
        {**row(stack.format(how="pop(0)")), "tests": stack_tests, "entry_point": "Stack"},
        {**row(fib.format(off="")), "tests": fib_tests, "entry_point": "fib"},
        {**row(fib.format(off=" + 1")), "tests": fib_tests, "entry_point": "fib"},
    ]
    verdicts = CodeVerifier(sandbox).verify_many(rows)
    got = [v.verdict for v in verdicts]
    assert got == ["pass", "fail"] * 5, [v.evidence.get("stderr_tail") for v in verdicts]


@pytest.mark.integration
def test_pytest_style_tests_may_use_raises_and_approx(sandbox: DockerSandbox) -> None:
    # the sandbox has no pytest: `import pytest` failed every solution (ModuleNotFoundError); the
    # harness's stand-in gives raises and approx, and a wrong solution still fails each check
    tests = (
        "import pytest\n\n"
        "def test_value():\n    assert inc(0.1) == pytest.approx(1.1)\n\n"
        "def test_bad_input():\n    with pytest.raises(TypeError, match='number'):\n        inc('a')\n"
    )
    right = "def inc(x):\n    if not isinstance(x, (int, float)):\n        raise TypeError('a number, please')\n    return x + 1\n"
    wrong = "def inc(x):\n    return x + 2\n"
    verdicts = CodeVerifier(sandbox).verify_many([row(right, tests=tests), row(wrong, tests=tests)])
    assert [v.verdict for v in verdicts] == ["pass", "fail"], [
        v.evidence.get("stderr_tail") for v in verdicts
    ]
    # the wrong one fails both: its approx assert, and the raises block (a TypeError whose message
    # does not match); a test function that raises counts once, as one failed assertion
    assert (verdicts[1].evidence["assertions_passed"], verdicts[1].evidence["assertions_total"]) == (0, 2)


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


@pytest.mark.parametrize("tag", ["python", "Python", "PYTHON", "python3", "Python3", "py", " python", ""])
def test_a_fenced_block_is_found_whatever_its_tag_case(tag: str) -> None:
    # "```Python" and "``` python" were not fences: the whole reply, prose and all, ran as the
    # solution (a SyntaxError failed a right inc); generation and the rewards read the same fence
    from ptfactory.filters.execution.programs import extract_solution
    from ptfactory.generators.records import extract_code_blocks

    reply = f"Here you go:\n```{tag}\ndef inc(x):\n    return x + 1\n```\nThis adds one."
    assert extract_solution("Write inc(x).", reply, "inc") == "def inc(x):\n    return x + 1\n"
    assert extract_code_blocks(reply) == ["def inc(x):\n    return x + 1"]
