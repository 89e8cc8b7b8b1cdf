"""``ptf run --batch NAME`` as a user runs it: a name is one set of seeds. Other seeds under a name
already run are refused (exit 2, naming the batch, what differs and the fix) instead of silently
running the old copy; the same seeds again resume; names that escape the seeds folder or collide
once made file names are refused, under ``--dry-run`` too."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

Ptf = Callable[..., subprocess.CompletedProcess[str]]


def _seeds(path: Path, instruction: str) -> Path:
    path.write_text(json.dumps({"id": "s1", "instruction": instruction, "response": "ok"}) + "\n")
    return path


def test_a_reused_batch_name_with_other_seeds_is_refused(ptf: Ptf, project: Path, tmp_path: Path) -> None:
    first = _seeds(tmp_path / "first.jsonl", "Name the capital of France.")
    run = ptf("run", "--seeds", str(first), "--batch", "x")
    assert run.returncode == 0, run.stdout + run.stderr
    staged = project / ".ptf" / "seeds" / "x"

    # same name, other content (and another file name): refused before anything runs
    other = _seeds(tmp_path / "other.jsonl", "Name the capital of Peru.")
    refused = ptf("run", "--seeds", str(other), "--batch", "x")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    message = " ".join(refused.stderr.split())
    assert "batch 'x' already holds other seeds" in message
    assert (
        "first.jsonl is staged but not given" in message and "other.jsonl is given but not staged" in message
    )
    assert "pick a new name" in message and f"rm -r {staged}" in message
    assert not (staged / "other.jsonl").exists()
    # same file name, other content: the message says the file differs
    (tmp_path / "again").mkdir()
    changed = _seeds(tmp_path / "again" / "first.jsonl", "Name the capital of Chile.")
    refused = ptf("run", "--seeds", str(changed), "--batch", "x")
    assert refused.returncode == 2 and "first.jsonl differs (staged sha256" in " ".join(
        refused.stderr.split()
    )
    # the dry run refuses it too, without running
    dry = ptf("run", "--seeds", str(changed), "--batch", "x", "--dry-run")
    assert dry.returncode == 2 and "already holds other seeds" in dry.stderr
    # the batch still holds the first seeds, and its materialized seeds are the first file's
    seeds = pq.read_table(project / ".ptf" / "assets" / "seed_tasks" / "x.parquet").to_pylist()
    assert {r["messages"][0]["content"] for r in seeds} == {"Name the capital of France."}

    # same name, same content: a resume, allowed
    resumed = ptf("run", "--seeds", str(first), "--batch", "x")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sorted(p.name for p in staged.iterdir() if not p.name.startswith(".")) == ["first.jsonl"]


_BAD_NAMES = ["../escape", "a b", "a/b", ".hidden", "..", "-x", "__all__", "x" * 101]


def test_batch_names_outside_the_pattern_are_refused_even_in_a_dry_run(
    ptf: Ptf, project: Path, seeds_file: Path
) -> None:
    runs = [(name, ["--dry-run"]) for name in _BAD_NAMES] + [("../escape", []), ("a b", [])]
    for name, extra in runs:
        result = ptf("run", "--seeds", str(seeds_file), f"--batch={name}", *extra)
        assert result.returncode == 2, (name, extra, result.stdout + result.stderr)
        shown = " ".join(result.stderr.split())
        assert "letters, digits" in shown and repr(name)[:40] in shown, (name, shown)
    seeds = project / ".ptf" / "seeds"
    assert not seeds.exists() or not any(seeds.iterdir())
    assert not (project / ".ptf" / "escape").exists()
    # `a_b` is a name of its own: `a b` can never be mapped onto it
    ok = ptf("run", "--seeds", str(seeds_file), "--batch", "2025-06-01.a_b", "--dry-run")
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_run_help_states_the_batch_name_pattern(ptf: Ptf) -> None:
    shown = " ".join(ptf("run", "--help").stdout.split())
    assert "letters, digits, '.', '_' and '-', starting with a letter or digit" in shown
