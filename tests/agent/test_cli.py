"""`ptf agent run` and `ptf agent replay` as a user runs them: the real CLI in a project, the tiny
model as the policy, the real Docker sandbox."""

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ptfactory.storage.versions import DatasetStore

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
Ptf = Callable[..., subprocess.CompletedProcess[str]]


def test_help_names_the_commands_and_the_from_file(ptf: Ptf) -> None:
    top = ptf("agent", "--help")
    assert top.returncode == 0 and "run" in top.stdout and "replay" in top.stdout
    replay = ptf("agent", "replay", "--help")
    assert replay.returncode == 0 and "--from" in replay.stdout and "catalog" in replay.stdout


def test_bad_tasks_file_is_a_clear_error(ptf: Ptf, project: Path) -> None:
    bad = project / "bad.jsonl"
    bad.write_text(
        json.dumps({"kind": "agent", "instruction": "x", "files": {"../a": "b"}, "check": "true"}) + "\n"
    )
    result = ptf("agent", "run", "bad.jsonl", "--out", "t.parquet")
    assert result.returncode == 2
    assert (
        "bad.jsonl:1" in result.stderr
        and "field 'files'" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_run_then_replay(ptf: Ptf, project: Path) -> None:
    tasks = project / "one.jsonl"  # one demo task, two rollouts: the CLI's path, kept short
    tasks.write_text((REPO / "demo" / "agent" / "tasks.jsonl").read_text().splitlines()[0] + "\n")
    result = ptf(
        "agent", "run", str(tasks), "--out", "t.parquet", "--rollouts", "2", "--max-steps", "1",
        "--max-tokens", "24", "--workers", "3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "2 episodes" in result.stderr and "step 1" in result.stderr  # progress and summary
    table = pq.read_table(project / "t.parquet")
    assert table.num_rows == 2
    assert {"messages", "tools", "steps", "outcome", "step_labels"} <= set(table.column_names)
    assert table.schema.metadata[b"ptfactory.schema"] == b"sample/3"
    sample_id = table.column("sample_id")[0].as_py()
    replay = ptf("agent", "replay", sample_id[:16], "--from", "t.parquet", "--json")
    assert replay.returncode == 0, replay.stderr
    report = json.loads(replay.stdout)
    assert report["reproduced"] and report["sample_id"] == sample_id
    missing = ptf("agent", "replay", "ffffffffffff", "--from", "t.parquet")
    assert missing.returncode == 2 and "no trajectory" in missing.stderr
    # published as an `agent` version: replayed by id from the catalog, no file needed
    DatasetStore(str(project / ".ptf")).publish("trajectories", table, kind="agent", config_hash="t")
    by_id = ptf("agent", "replay", sample_id[:16], "--json")
    assert by_id.returncode == 0, by_id.stderr
    assert json.loads(by_id.stdout)["sample_id"] == sample_id and json.loads(by_id.stdout)["reproduced"]
    unknown = ptf("agent", "replay", "ffffffffffff")
    assert unknown.returncode == 2 and "--from" in unknown.stderr and "Traceback" not in unknown.stderr
