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
from dataclasses import dataclass
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


def _markers(root: Path) -> dict[str, float]:
    """Each partitioned asset's shard for the batch, and when it was written."""
    return {p.parent.name: p.stat().st_mtime for p in (root / ".ptf" / "assets").glob("*/b1.parquet")}


@dataclass
class Clean:
    published: list[tuple[str, str]]
    stages: list[str]  # the batch's assets in the order the run wrote them


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Clean:
    root = _project(tmp_path_factory.mktemp("clean") / "p", tiny_model)
    process = _run(root, root / "calls.log")
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, output[-3000:]
    written = _markers(root)
    return Clean(_published(root), sorted(written, key=written.__getitem__))


# stages that call an engine: the kill waits for one of their requests to be answered
ENGINE_STAGES = {"candidate_instructions", "candidate_responses", "difficulty_scored", "judged_samples"}


def test_kill_9_during_each_stage_then_rerun(clean: Clean, tmp_path: Path, tiny_model: Path) -> None:
    """One project, killed once inside every stage in turn (each run resumes the one before it),
    then run to the end: the same rows as a clean run, and no finished request sent twice."""
    assert {"seed_tasks", "candidate_responses", "judged_samples", "curated_samples"} <= set(clean.stages)
    root = _project(tmp_path / "p", tiny_model)
    log = root / "calls.log"
    interrupted: list[str] = []
    bounds: list[int] = []  # where each run's engine calls begin in the log
    # the stage after the last shard is publishing the datasets
    for before, stage in zip(clean.stages, [*clean.stages[1:], "publish"], strict=True):
        started = time.time()
        bounds.append(len(_events(log)))
        process = _run(root, log)
        done_before, begun = -1, 0.0
        deadline = time.monotonic() + 900
        while True:
            assert process.poll() is None, process.stdout.read()[-3000:] if process.stdout else ""
            assert time.monotonic() < deadline
            markers = _markers(root)
            if markers.get(before, 0) >= started:  # `stage` has begun
                done = sum(1 for e, _ in _events(log) if e == "done")
                if done_before < 0:
                    done_before, begun = done, time.monotonic()
                # mid-flight: after one of its requests was answered (engine stages), else at once
                if stage not in ENGINE_STAGES or done > done_before or time.monotonic() - begun > 30:
                    break
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if _markers(root).get(stage, 0) < started:
            interrupted.append(stage)
    assert set(interrupted) >= ENGINE_STAGES, interrupted  # those were killed mid-request

    bounds.append(len(_events(log)))
    rerun = _run(root, log)
    output, _ = rerun.communicate(timeout=900)
    assert rerun.returncode == 0, output[-3000:]
    events = _events(log)
    runs = [events[a:b] for a, b in zip(bounds, [*bounds[1:], len(events)], strict=True)]
    finished: set[str] = set()
    for calls in runs:
        resent = {k for e, k in calls if e == "sent"} & finished
        assert resent == set(), f"{len(resent)} finished requests were sent again"
        finished |= {k for e, k in calls if e == "done"}
    assert _published(root) == clean.published  # nothing lost, nothing doubled
    print(f"killed inside {len(interrupted)} stages: {', '.join(interrupted)}")

    executed = AssetStore(str(root / ".ptf")).read("execution_validated", "b1").to_pylist()
    evil = [r for r in executed if r["kind"] == "code" and r["provenance"]["method"] == "reference"]
    assert evil, "the hostile reference solution was not executed"
    run = evil[0]["scores"]["execution"]
    assert run["status"] in ("failed", "timeout", "oom")  # contained, and recorded as such
    assert evil[0]["decisions"][-1]["verdict"] == "drop"
    assert not Path("/etc/pwned").exists()
