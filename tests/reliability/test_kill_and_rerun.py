"""`kill -9` a `ptf run` in the middle of a stage, rerun it: it completes, publishes what an
uninterrupted run publishes, and sends no engine request that had finished. The seeds carry a
hostile code sample too: it is contained by the sandbox and recorded, and the batch goes on."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.versions import DatasetStore
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


def _markers(root: Path) -> dict[str, float]:
    """When each asset's shard (the batch's, or the whole table's for unpartitioned ones) was
    written. (Not the run's printed progress: Dagster captures a step's stderr into its logs.)"""
    written: dict[str, float] = {}
    for path in (root / ".ptf" / "assets").glob("*/*.parquet"):
        if path.name.startswith(".tmp-"):
            continue  # an atomic write in flight: renamed away between the glob and the stat
        try:
            written[path.parent.name] = max(written.get(path.parent.name, 0.0), path.stat().st_mtime)
        except FileNotFoundError:
            continue
    return written


class _Output:
    """A `ptf run`'s output read as it comes: which stages it has finished, in order."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line)

    def tail(self) -> str:
        self._thread.join(timeout=5)
        return "".join(self.lines)[-3000:]


@dataclass
class Clean:
    published: list[tuple[str, str]]
    stages: list[str]  # the stages in the order the run wrote them


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Clean:
    root = _project(tmp_path_factory.mktemp("clean") / "p", tiny_model)
    process = _run(root, root / "calls.log")
    output = _Output(process)
    assert process.wait(timeout=900) == 0, output.tail()
    written = _markers(root)
    return Clean(_published(root), sorted(written, key=written.__getitem__))


# stages that call an engine: the kill waits for one of their requests to be answered
ENGINE_STAGES = {"candidate_instructions", "candidate_responses", "difficulty_scored", "judged_samples"}


@pytest.mark.timeout(2700)  # a run per stage, each replaying the cached stages before it
def test_kill_9_during_each_stage_then_rerun(clean: Clean, tmp_path: Path, tiny_model: Path) -> None:
    """One project, killed once inside every stage in turn (each run resumes the one before it),
    then run to the end: the same rows as a clean run, and no finished request sent twice."""
    assert {"seed_tasks", "candidate_responses", "judged_samples", "curated_samples"} <= set(clean.stages), (
        clean.stages
    )
    root = _project(tmp_path / "p", tiny_model)
    log = root / "calls.log"
    interrupted: list[str] = []
    bounds: list[int] = []  # where each run's engine calls begin in the log
    for before, stage in itertools.pairwise([*clean.stages, "publish"]):
        started, wall = time.monotonic(), time.time()
        bounds.append(len(_events(log)))
        process = _run(root, log)
        output = _Output(process)
        done_before, begun = -1, 0.0
        try:  # killed in any case: a failed wait must not leave a run behind
            while True:
                assert process.poll() is None, output.tail()
                assert time.monotonic() < started + 900, output.tail()
                if _markers(root).get(before, 0.0) >= wall:  # `stage` has begun
                    done = sum(1 for e, _ in _events(log) if e == "done")
                    if done_before < 0:
                        done_before, begun = done, time.monotonic()
                    # mid-flight: after one of its requests was answered (engine stages), else at once
                    if stage not in ENGINE_STAGES or done > done_before or time.monotonic() - begun > 30:
                        break
                time.sleep(0.02)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if _markers(root).get(stage, 0.0) < wall:
            interrupted.append(stage)
        print(f"killed during {stage} after {time.monotonic() - started:.0f}s", flush=True)
    assert set(interrupted) >= ENGINE_STAGES, interrupted  # those were killed mid-request

    bounds.append(len(_events(log)))
    rerun = _run(root, log)
    output = _Output(rerun)
    try:
        assert rerun.wait(timeout=900) == 0, output.tail()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(rerun.pid, signal.SIGKILL)
    events = _events(log)
    runs = [events[a:b] for a, b in zip(bounds, [*bounds[1:], len(events)], strict=True)]
    finished: set[str] = set()
    for calls in runs:
        resent = {k for e, k in calls if e == "sent"} & finished
        assert resent == set(), f"{len(resent)} finished requests were sent again"
        finished |= {k for e, k in calls if e == "done"}
    assert _published(root) == clean.published  # nothing lost, nothing doubled
    print(f"killed inside {len(interrupted)} of {len(clean.stages)} stages: {', '.join(interrupted)}")

    executed = AssetStore(str(root / ".ptf")).read("execution_validated", "b1").to_pylist()
    evil = [r for r in executed if r["kind"] == "code" and r["provenance"]["method"] == "reference"]
    assert evil, "the hostile reference solution was not executed"
    run = evil[0]["scores"]["execution"]
    assert run["status"] in ("failed", "timeout", "oom")  # contained, and recorded as such
    # execution records the failure and keeps the row for the judges; difficulty drops it
    scored = AssetStore(str(root / ".ptf")).read("difficulty_scored", "b1").to_pylist()
    trail = next(r["decisions"] for r in scored if r["sample_id"] == evil[0]["sample_id"])
    assert trail[-1]["stage"] == "difficulty" and trail[-1]["verdict"] == "drop", trail
    assert not Path("/etc/pwned").exists()
