"""`kill -9` a `ptf run` in the middle of a stage, rerun it: it completes, publishes what an
uninterrupted run publishes, and sends no engine request that had finished. The seeds carry a
hostile code sample too: it is contained by the sandbox and recorded, and the batch goes on."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from storage.assetstore import AssetStore
from storage.versions import DatasetStore
from tests.conftest import PTF, REPO, fast_factory_yaml

pytestmark = pytest.mark.integration

HOSTILE = (
    "import os\n"
    "open('/etc/pwned', 'w').write('x')  # a read-only root\n"
    "while True:\n"
    "    os.fork()  # capped by the pids limit\n"
)
SEEDS = [
    {"id": "s1", "instruction": "Say hi.", "response": "Hi!"},
    {"id": "s2", "instruction": "Count to three.", "response": "1, 2, 3"},
    {"id": "s3", "instruction": "Name a color."},
    {
        "id": "evil",
        "kind": "code",
        "instruction": 'def inc(x):\n    """x plus one"""\n',
        "response": HOSTILE,
        "entry_point": "inc",
        "tests": "def check(candidate):\n    assert candidate(1) == 2\n",
    },
]


def _project(root: Path, model: Path) -> Path:
    root.mkdir(parents=True)
    shutil.copy(REPO / "dagster.yaml", root / "dagster.yaml")
    (root / "factory.yaml").write_text(fast_factory_yaml(model))
    (root / "seeds.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SEEDS))
    return root


def _run(root: Path, log: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PTF_HOME", "DAGSTER_HOME")}
    env.update(PTF_ENGINE_CALL_LOG=str(log), NO_COLOR="1")
    return subprocess.Popen(
        [*PTF, "run", "--seeds", "seeds.jsonl", "--batch", "b1"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _events(log: Path) -> list[tuple[str, str]]:
    if not log.exists():
        return []
    return [tuple(line.split()) for line in log.read_text().splitlines() if line.strip()]  # type: ignore[misc]


def _published(root: Path) -> list[tuple[str, str]]:
    rows = DatasetStore(str(root / ".ptf")).read("sft@latest").to_pylist()
    return sorted((r["sample_id"], r["messages"][-1]["content"]) for r in rows)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> list[tuple[str, str]]:
    root = _project(tmp_path_factory.mktemp("clean") / "p", tiny_model)
    process = _run(root, root / "calls.log")
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, output[-3000:]
    return _published(root)


# the asset whose output marks that the killed stage has begun
@pytest.mark.parametrize(
    ("stage", "after"),
    [("candidate_responses", "candidate_instructions"), ("judged_samples", "difficulty_scored")],
)
def test_kill_9_mid_stage_then_rerun(
    stage: str, after: str, clean: list[tuple[str, str]], tmp_path: Path, tiny_model: Path
) -> None:
    root = _project(tmp_path / "p", tiny_model)
    log = root / "calls.log"
    process = _run(root, log)
    marker = root / ".ptf" / "assets" / after / "b1.parquet"
    deadline = time.monotonic() + 900
    while not marker.exists():
        assert process.poll() is None, process.stdout.read()[-3000:] if process.stdout else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    done_before = sum(1 for e, _ in _events(log) if e == "done")
    while sum(1 for e, _ in _events(log) if e == "done") == done_before and process.poll() is None:
        time.sleep(0.02)  # the stage has had an engine request answered: kill it mid-flight
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    first = _events(log)
    finished = {k for e, k in first if e == "done"}

    rerun = _run(root, log)
    output, _ = rerun.communicate(timeout=900)
    assert rerun.returncode == 0, output[-3000:]
    second = _events(log)[len(first) :]
    resent = {k for e, k in second if e == "sent"} & finished
    assert resent == set(), f"{len(resent)} finished requests were sent again"
    assert _published(root) == clean  # nothing lost, nothing doubled

    executed = AssetStore(str(root / ".ptf")).read("execution_validated", "b1").to_pylist()
    evil = [r for r in executed if r["kind"] == "code" and r["provenance"]["method"] == "reference"]
    assert evil, "the hostile reference solution was not executed"
    run = evil[0]["scores"]["execution"]
    assert run["status"] in ("failed", "timeout", "oom")  # contained, and recorded as such
    assert evil[0]["decisions"][-1]["verdict"] == "drop"
    assert not Path("/etc/pwned").exists()
