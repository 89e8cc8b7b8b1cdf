"""A fault is the infrastructure's only when a known-good control program fails the same way in the
same sandbox: solutions that kill their runner or sleep past the limit fail, in the real Docker
sandbox; a sandbox whose every job dies abstains, after a retry; nothing abstains for free."""

import re
from collections.abc import Iterator, Mapping, Sequence

import pytest

from ptfactory.errors import SandboxError
from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.control import control_job, infra_gate, is_fault, run_checked
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import ExecResult, Limits
from ptfactory.filters.execution.programs import program
from ptfactory.filters.execution.remembering import Remembering
from tests.filters.faults import DyingSandbox

TESTS = "def check(candidate):\n    assert candidate(1) == 2\n"


def job(body: str) -> Job:
    return Job({"program.py": program(f"def inc(x):\n{body}", TESTS, "inc")})


KILLS_ITS_RUNNER = job("    import os, signal\n    os.kill(-1, signal.SIGKILL)\n")
SLEEPS_PAST_THE_LIMIT = job("    import time\n    time.sleep(30)\n")
PASSES = job("    return x + 1\n")


@pytest.fixture(scope="module")
def docker() -> Iterator[DockerSandbox]:
    with DockerSandbox(Limits(timeout_s=1, memory_mb=128, pids=32), workers=2) as box:
        yield box


@pytest.mark.integration
def test_faults_the_solution_causes_are_its_failures(docker: DockerSandbox) -> None:
    killed, slept, passed = run_checked(docker, [KILLS_ITS_RUNNER, SLEEPS_PAST_THE_LIMIT, PASSES])
    assert (killed.result.status, killed.infra, killed.blamed, killed.controls) == (
        "failed",
        False,
        True,
        ("passed",),
    )
    assert killed.result.exit_code == 137 and killed.result.assertions_total is None
    assert (slept.result.status, slept.infra, slept.blamed, slept.controls) == (
        "timeout",
        False,
        True,
        ("passed",),
    )
    assert (passed.result.status, passed.controls, passed.tries) == ("passed", (), 1)  # no fault: no control


@pytest.mark.integration
def test_a_dying_sandbox_is_the_infrastructures_fault(docker: DockerSandbox) -> None:
    """Through a stage's remembering sandbox: the control and the retry are jobs of their own (else
    the first control's answer, or the fault itself, would come back without running)."""
    dying = DyingSandbox(docker)
    remembering = Remembering(dying)
    checked = run_checked(remembering, [PASSES, PASSES], retries=1)
    # the job, its control, the retry, its control (each distinct job once): all died the same way
    assert dying.jobs == 4
    for one in checked:
        assert one.infra and one.result.status == "sandbox_error"
        assert (one.tries, one.controls) == (2, ("failed", "failed"))
        assert "the control program failed too" in one.result.detail
    again = run_checked(remembering, [PASSES], retries=1)  # a replay gets the same answers, unrun
    assert again[0].infra and dying.jobs == 4


def reported(text: str, passed: int, total: int) -> str:
    """The count line the harness writes for the program ``text``: it carries that run's nonce
    (the last argument of the program's ``run(...)`` call); a line without it is not the harness's."""
    nonce = re.findall(r"'([0-9a-f]{16}-[0-9a-f]{24})'\)", text)[-1]
    return f"\n@ptf-assertions {nonce} {passed} {total}\n"


class Scripted(Sandbox):
    """Results by program (pure logic of the classification): ``faults`` maps a marker in the
    program to the statuses of its successive runs; the control passes unless ``broken``."""

    backend = "scripted"

    def __init__(self, faults: dict[str, list[str]], broken: bool = False, raises: bool = False) -> None:
        super().__init__(workers=1)
        self.faults, self.broken, self.raises = faults, broken, raises

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        if self.raises:
            raise SandboxError("no container can start")
        text = str(files["program.py"])
        if "ptf control" in text:
            if self.broken:
                return ExecResult("sandbox_error", None, 1.0, detail="runner: broken pipe")
            return ExecResult("passed", 0, 1.0, stdout_tail=reported(text, 1, 1))
        for marker, statuses in self.faults.items():
            if marker in text:
                status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
                if status != "passed":
                    return ExecResult(status, None, 1.0)
                break
        # a pass as the harness reports it: a clean exit after its assertion counts
        return ExecResult("passed", 0, 1.0, stdout_tail=reported(text, 1, 1))


def test_a_sandbox_error_the_solution_causes_is_a_failure() -> None:
    (checked,) = run_checked(Scripted({"def inc(x)": ["sandbox_error"]}), [PASSES])
    assert (checked.result.status, checked.infra, checked.blamed) == ("failed", False, True)
    assert "the solution caused it" in checked.result.detail


def test_an_infrastructure_fault_that_clears_on_retry_counts_the_retry() -> None:
    sandbox = Scripted({"def inc(x)": ["sandbox_error", "passed"]}, broken=True)
    (checked,) = run_checked(sandbox, [PASSES], retries=1)
    assert (checked.result.status, checked.infra, checked.tries, checked.controls) == (
        "passed",
        False,
        2,
        ("sandbox_error",),
    )


def test_a_sandbox_that_raises_abstains_every_job() -> None:
    checked = run_checked(Scripted({}, raises=True), [PASSES, SLEEPS_PAST_THE_LIMIT], retries=0)
    assert all(c.infra and c.result.status == "sandbox_error" for c in checked)
    assert "no container can start" in checked[0].result.detail


def test_what_counts_as_a_fault() -> None:
    assert is_fault(ExecResult("timeout", 137, 1.0)) and is_fault(ExecResult("oom", 137, 1.0))
    assert is_fault(ExecResult("failed", 137, 1.0))  # the runner died under it
    assert not is_fault(ExecResult("failed", 1, 1.0, assertions_passed=0, assertions_total=1))
    assert not is_fault(ExecResult("failed", 3, 1.0))  # it exited by itself
    assert not is_fault(ExecResult("passed", 0, 1.0))
    assert control_job("a").files != control_job("b").files  # each control is its own job


def test_the_gate() -> None:
    assert infra_gate(1, 10, 0.1).passed and not infra_gate(2, 10, 0.1).passed
    assert infra_gate(0, 0, 0.0).passed  # no runs, nothing wrong
    assert "nothing from this batch is published" in infra_gate(3, 4, 0.1).describe()
