"""Graded execution in the real Docker sandbox: the harness counts each assert of the tests, a
failing one does not stop the run, and hostile solutions still end with an honest status."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from ptfactory.filters.execution.base import Job
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import ExecResult, Limits
from ptfactory.filters.execution.programs import graded, program
from ptfactory.filters.execution.validate import ExecutionConfig, validate_samples
from ptfactory.storage.schema import from_records, sample_id, validate_table
from tests.filters.faults import DyingSandbox

pytestmark = pytest.mark.integration

TESTS = (
    "def check(candidate):\n"
    "    assert candidate(1) == 2\n"
    "    assert candidate(2) == 3\n"
    "    assert candidate(3) == 4, 'three'\n"
)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    with DockerSandbox(Limits(timeout_s=3, memory_mb=128, pids=32), workers=2) as box:
        yield box


def _run(sandbox: DockerSandbox, solution: str, tests: str = TESTS, entry: str | None = "inc") -> ExecResult:
    (result,) = sandbox.run_many([Job({"program.py": program(solution, tests, entry)})])
    return graded(result)


def test_two_of_three_assertions(sandbox: DockerSandbox) -> None:
    result = _run(sandbox, "def inc(x):\n    print('called', x)\n    return x + 1 if x < 3 else 0\n")
    assert (result.status, result.assertions_passed, result.assertions_total) == ("failed", 2, 3)
    assert "tests.py:4: assertion failed" in result.stderr_tail  # which assert, since none stopped the run
    assert result.stdout_tail == "called 1\ncalled 2\ncalled 3\n"  # the harness's count line taken out


def test_all_assertions_pass(sandbox: DockerSandbox) -> None:
    result = _run(sandbox, "def inc(x):\n    return x + 1\n")
    assert (result.status, result.exit_code, result.assertions_passed, result.assertions_total) == (
        "passed",
        0,
        3,
        3,
    )
    assert result.score()["assertions_passed"] == 3 and result.score()["assertions_total"] == 3


def test_an_early_clean_exit_is_a_failure_not_a_pass(sandbox: DockerSandbox) -> None:
    """A solution that leaves with status 0 before its tests run (``os._exit(0)``) never reports
    its asserts: graded reads that as a failure, whatever the exit code said."""
    result = _run(sandbox, "import os\nos._exit(0)\ndef inc(x):\n    return x + 1\n")
    assert result.exit_code == 0
    assert (result.status, result.assertions_total) == ("failed", None)
    assert "exited before the harness reported" in result.detail


@pytest.mark.parametrize(
    ("name", "solution", "expected"),
    [
        # an exception inside an assert fails that assert only
        ("raises", "def inc(x):\n    if x == 2:\n        raise ValueError('no')\n    return x + 1\n", 2),
        # sys.exit(0) from the candidate used to end the run with exit code 0: now one failed assert
        ("exits_zero", "import sys\ndef inc(x):\n    if x == 2:\n        sys.exit(0)\n    return x + 1\n", 2),
        # rebinding print, exit and the streams does not silence the count; rebinding a builtin
        # the tests rely on (print) fails the whole run, none of its asserts held
        (
            "tampers",
            "import builtins, os, sys\nbuiltins.print = None\nsys.exit = None\nos._exit = None\n"
            "def inc(x):\n    return x + 1 if x != 1 else 5\n",
            0,
        ),
        ("does_not_parse", "def inc(x) return x\n", 0),
    ],
)
def test_failing_solutions_are_graded(
    sandbox: DockerSandbox, name: str, solution: str, expected: int
) -> None:
    result = _run(sandbox, solution)
    assert (result.status, result.assertions_passed, result.assertions_total) == ("failed", expected, 3), (
        name,
        result,
    )


def test_a_loop_is_a_timeout_with_no_counts(sandbox: DockerSandbox) -> None:
    result = _run(sandbox, "def inc(x):\n    while x == 3:\n        pass\n    return x + 1\n")
    assert result.status == "timeout"
    assert (result.assertions_passed, result.assertions_total) == (None, None)


def test_an_exception_outside_the_asserts_counts_the_unreached_ones() -> None:
    """check() stops at an error outside an assert: the asserts it never reached count as failed."""
    tests = "def check(candidate):\n    assert candidate(1) == 2\n    value = candidate(None)\n    assert value == 1\n"
    with DockerSandbox(Limits(timeout_s=3)) as sandbox:
        result = _run(sandbox, "def inc(x):\n    return x + 1\n", tests)
    assert (result.status, result.assertions_passed, result.assertions_total) == ("failed", 1, 2)


def test_module_level_tests_without_an_entry_point(sandbox: DockerSandbox) -> None:
    tests = "for i in range(4):\n    assert add(i, 1) == i + 1 + (i == 3)\n"
    result = _run(sandbox, "def add(a, b):\n    return a + b\n", tests, None)
    assert (result.status, result.assertions_passed, result.assertions_total) == ("failed", 3, 4)


PYTEST_STYLE = (
    "def test_small():\n    assert inc(1) == 2\n\n"
    "def test_big():\n    assert inc(10) == 11\n    assert inc(-1) == 0\n\n"
    "def helper(x):\n    assert x\n"  # takes an argument: not a test, not called
)
UNITTEST_STYLE = (
    "import unittest\n\n"
    "class TestInc(unittest.TestCase):\n"
    "    def test_small(self):\n        self.assertEqual(inc(1), 2)\n\n"
    "    def test_big(self):\n        self.assertEqual(inc(10), 11)\n"
)


@pytest.mark.parametrize(
    ("tests", "right", "wrong"),
    [(PYTEST_STYLE, (3, 3), (2, 3)), (UNITTEST_STYLE, (2, 2), (1, 2))],
    ids=["pytest-functions", "unittest-case"],
)
def test_test_functions_and_test_cases_run(
    sandbox: DockerSandbox, tests: str, right: tuple[int, int], wrong: tuple[int, int]
) -> None:
    """Tests written as test_ functions or a TestCase class: nothing in them calls them, and 0 of
    0 assertions used to pass any solution, a wrong one too."""
    good = _run(sandbox, "def inc(x):\n    return x + 1\n", tests, None)
    assert (good.status, good.assertions_passed, good.assertions_total) == ("passed", *right)
    bad = _run(sandbox, "def inc(x):\n    return x + 1 if x < 5 else x\n", tests, None)
    assert (bad.status, bad.assertions_passed, bad.assertions_total) == ("failed", *wrong)


def test_tests_that_never_run_are_a_failure(sandbox: DockerSandbox) -> None:
    """check(candidate) without an entry point to call it with: nothing is tested, not a pass."""
    result = _run(sandbox, "def inc(x):\n    return 0\n", TESTS, None)
    assert result.status == "failed" and result.assertions_passed == 0
    assert "no test ran" in result.stderr_tail and "needs the entry point" in result.stderr_tail


def _code_records(answers: tuple[str, ...]) -> list[dict[str, object]]:
    prompt = 'def inc(x):\n    """x plus one"""\n'
    records: list[dict[str, object]] = []
    for answer in answers:
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
        records.append(
            {
                "sample_id": sample_id("code", messages, tests=TESTS, entry_point="inc"),
                "batch": "b",
                "kind": "code",
                "messages": messages,
                "tests": TESTS,
                "entry_point": "inc",
                "decisions": [],
            }
        )
    return records


def test_validate_samples_records_the_counts_and_drops_nothing(sandbox: DockerSandbox) -> None:
    """Faults the solution causes (a loop past the limit, killing its runner) are its statuses: a
    control program passed after each, so none is an infrastructure error."""
    records = _code_records(
        (
            "    return x + 1\n",
            "    return x + 1 if x < 3 else 0\n",
            "    while True:\n        pass\n",
            "    import os, signal\n    os.kill(-1, signal.SIGKILL)\n",
        )
    )
    table, stats = validate_samples(from_records(records), sandbox)
    validate_table(table)
    rows = table.to_pylist()
    runs = [r["scores"]["execution"] for r in rows]
    assert [(e["status"], e["assertions_passed"], e["assertions_total"]) for e in runs] == [
        ("passed", 3, 3),
        ("failed", 2, 3),
        ("timeout", None, None),
        ("failed", None, None),
    ]
    # the failures are decided by the difficulty stage: here every row is kept, with the outcome
    assert [(d["verdict"], d["reason"]) for d in (r["decisions"][-1] for r in rows)] == [
        ("keep", "tests_passed"),
        ("keep", "execution_failed"),
        ("keep", "execution_timeout"),
        ("keep", "execution_failed"),
    ]
    assert rows[1]["decisions"][-1]["detail"].startswith("2/3 assertions held")
    assert (stats.assertions_passed, stats.assertions_total) == (5, 6)
    assert (stats.solution_faults, stats.infra_errors, stats.retries) == (2, 0, 0)
    assert stats.gate.passed and stats.gate.share == 0.0


def test_an_unreliable_sandbox_publishes_nothing_of_the_batch(sandbox: DockerSandbox) -> None:
    """Every job dies, the control too: the code rows abstain (sandbox_error, never a failure), and
    past max_infra_error_share every live row of the batch is dropped: nothing of it goes on."""
    code = _code_records(("    return x + 1\n", "    return 0\n"))
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    records = [
        *code,
        {"sample_id": sample_id("sft", chat), "batch": "b", "kind": "sft", "messages": chat, "decisions": []},
    ]
    dying = DyingSandbox(sandbox)
    strict = ExecutionConfig(max_infra_error_share=0.1, infra_retries=0)
    table, stats = validate_samples(from_records(records), dying, config=strict)
    validate_table(table)
    rows = table.to_pylist()
    assert [r["scores"]["execution"]["status"] for r in rows[:2]] == ["sandbox_error", "sandbox_error"]
    assert [(r["decisions"][-1]["verdict"], r["decisions"][-1]["reason"]) for r in rows] == [
        ("drop", "sandbox_unreliable")
    ] * 3
    assert (stats.infra_errors, stats.validations, stats.solution_faults) == (2, 2, 0)
    assert not stats.gate.passed and stats.gate.share == 1.0
    assert "nothing from this batch is published" in rows[2]["decisions"][-1]["detail"]
    # a share the batch stays under: the rows go on, the faults recorded as the sandbox's
    lenient = ExecutionConfig(max_infra_error_share=1.0, infra_retries=0)
    kept, _ = validate_samples(from_records(records), dying, config=lenient)
    assert [r["decisions"][-1]["reason"] for r in kept.to_pylist()] == [
        "execution_sandbox_error",
        "execution_sandbox_error",
        "not_code",
    ]
    assert "the control program failed too" in kept.to_pylist()[0]["decisions"][-1]["detail"]


def test_the_harness_refuses_to_run_on_the_host(tmp_path: Path) -> None:
    """Imported (not the sandbox's program.py), run() execs nothing: the marker file is not written."""
    from ptfactory.filters.execution import harness

    marker = tmp_path / "ran"
    with pytest.raises(RuntimeError, match="only inside the sandbox"):
        harness.run(f"open({str(marker)!r}, 'w').write('x')", "", None)
    assert not marker.exists()
