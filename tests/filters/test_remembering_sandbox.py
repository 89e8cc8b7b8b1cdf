"""The stage's remembering sandbox (filters/execution/remembering.py), on the real Docker sandbox:
each distinct job runs once; a repeat, in the same call or a later one, gets the first result."""

import pytest

from ptfactory.filters.execution.base import Job
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.remembering import Remembering

pytestmark = pytest.mark.integration

# prints a fresh random number each time it really runs: a remembered result repeats it
RANDOM = Job({"program.py": "import random\nprint(random.random())\n"})
FAILS = Job({"program.py": "raise SystemExit(3)\n"})


def test_each_distinct_job_runs_once_and_repeats_get_its_result() -> None:
    with Remembering(DockerSandbox(Limits(timeout_s=20), workers=2)) as sandbox:
        first = sandbox.run_many([RANDOM, FAILS, RANDOM])
        assert [r.status for r in first] == ["passed", "failed", "passed"]
        assert first[0].stdout_tail == first[2].stdout_tail and first[0].stdout_tail.strip()
        assert sandbox.runs == 2
        again = sandbox.run_many([FAILS, RANDOM])
        single = sandbox.run(RANDOM.files, RANDOM.command)
        assert sandbox.runs == 2
        assert again[1].stdout_tail == single.stdout_tail == first[0].stdout_tail
        assert again[0].exit_code == 3
        # other limits or other files are another job: it runs
        other = sandbox.run(RANDOM.files, RANDOM.command, Limits(timeout_s=21))
        changed = sandbox.run({"program.py": RANDOM.files["program.py"] + "\n"}, RANDOM.command)
        assert sandbox.runs == 4
        assert len({first[0].stdout_tail, other.stdout_tail, changed.stdout_tail}) == 3
        # a caller editing a result does not edit what is remembered
        single.status = "edited"
        assert sandbox.run(RANDOM.files, RANDOM.command).status == "passed"
