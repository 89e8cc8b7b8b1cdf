"""Procedural seeds and their verifier: reasoning-gym tasks drawn into seed rows that keep the
generator's metadata; a pass is a score of exactly 1.0, partial credit is recorded, never passed;
families built from benchmark items are refused; `ptf seeds procedural` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ptfactory.errors import SeedError, UserInputError
from ptfactory.filters.verify import ProceduralVerifier, WorkerPool
from ptfactory.filters.verify.procedural import DENIED, family_problem, procedural_families
from ptfactory.generators.procedural import (
    ANSWER_FORMAT,
    ProceduralSeeds,
    draw_seed_rows,
    procedural_seed_tasks,
)
from ptfactory.generators.seeds import read_seeds, seeds_to_table


@pytest.fixture(scope="module")
def seed_rows() -> list[dict[str, Any]]:
    return draw_seed_rows(["chain_sum", "boxnet"], count=3, seed=7)


@pytest.fixture(scope="module")
def rows(seed_rows: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The drawn tasks as the factory's seed rows (through a seed file, as a user feeds them)."""
    path = tmp_path_factory.mktemp("seeds") / "procedural.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in seed_rows))
    rows: list[dict[str, Any]] = seeds_to_table(read_seeds(path), "b1").to_pylist()
    return rows


@pytest.fixture(scope="module")
def verifier() -> Iterator[ProceduralVerifier]:
    verifier = ProceduralVerifier(WorkerPool(workers=0))  # in this (main) thread: no process start-up
    yield verifier
    verifier.close()


def answered(row: dict[str, Any], text: str) -> dict[str, Any]:
    return {**row, "messages": [*row["messages"], {"role": "assistant", "content": text}]}


def test_seed_rows_keep_the_generators_metadata(
    seed_rows: list[dict[str, Any]], rows: list[dict[str, Any]]
) -> None:
    assert [r["id"] for r in seed_rows[:3]] == ["chain_sum-7-0", "chain_sum-7-1", "chain_sum-7-2"]
    assert all(r["instruction"].endswith(ANSWER_FORMAT) for r in seed_rows)
    assert seed_rows[0]["metadata"]["source_dataset"] == "chain_sum" and "answer" in seed_rows[0]
    assert "answer" not in seed_rows[3]  # boxnet: many valid answers, scored from the metadata
    reference = rows[0]["reference"]
    assert (reference["family"], reference["source"], reference["answer"]) == (
        "chain_sum",
        "procedural",
        seed_rows[0]["answer"],
    )
    assert json.loads(reference["metadata"]) == json.loads(json.dumps(seed_rows[0]["metadata"]))  # intact
    assert rows[0]["decisions"][0]["reason"] == "verifiable"
    # the same seed draws the same tasks; a larger count extends a smaller one
    assert draw_seed_rows(["chain_sum"], count=4, seed=7)[:3] == seed_rows[:3]


def test_only_a_score_of_one_passes(rows: list[dict[str, Any]], verifier: ProceduralVerifier) -> None:
    task = rows[0]
    oracle = task["reference"]["answer"]
    right, partial, wrong, untagged, stated = verifier.verify_many(
        [
            answered(task, f"Step by step... <answer>{oracle}</answer>"),
            answered(task, f"<answer>{oracle} apples</answer>"),  # the default scorer's substring credit
            answered(task, "<answer>123456789</answer>"),
            answered(task, f"So 3 + 4 = 7, and we get {oracle} in all."),  # only a last number: not read
            answered(task, f"Adding up, the answer is {oracle}."),
        ]
    )
    assert (right.verdict, right.score, right.partial) == ("pass", 1.0, 1.0)
    assert right.evidence["extracted"] == oracle and right.evidence["rule"] == "answer_tag"
    assert partial.verdict == "partial" and partial.score == 0.0 and not partial.passed
    assert 0 < partial.partial < 1 and partial.evidence["score"] == partial.partial  # recorded
    assert not partial.final
    assert (wrong.verdict, wrong.final) == ("fail", True)
    assert (untagged.verdict, untagged.reason) == ("no_answer", "no_answer")
    assert stated.passed and stated.evidence["rule"] == "stated"
    assert verifier.verify(rows[0]).reason == "no_response"  # the seed row itself has no response


def test_scored_in_worker_processes(rows: list[dict[str, Any]]) -> None:
    verifier = ProceduralVerifier()  # the default: a spawned worker, bounded in time
    try:
        task = rows[1]
        verdicts = verifier.verify_many([answered(task, f"<answer>{task['reference']['answer']}</answer>")])
        assert verdicts[0].passed
    finally:
        verifier.close()


def test_the_deny_list() -> None:
    assert "gsm_symbolic" in DENIED and "GSM8K" in DENIED["gsm_symbolic"]
    available = procedural_families()
    assert not set(DENIED) & set(available) and "chain_sum" in available and len(available) > 90
    for name in DENIED:
        assert family_problem(name) == f"procedural family {name!r} is left out: {DENIED[name]}"
        with pytest.raises(UserInputError, match="left out"):
            draw_seed_rows([name], count=1)
        with pytest.raises(ValidationError, match="left out"):
            ProceduralSeeds(datasets=[name])
    assert "did you mean chain_sum" in (family_problem("chain_sums") or "")


def test_a_seed_file_naming_a_denied_family_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"instruction": "Q?", "metadata": {"source_dataset": "gsm_symbolic"}}) + "\n")
    with pytest.raises(
        SeedError, match=r"s.jsonl:1: field 'metadata': procedural family 'gsm_symbolic' is left out"
    ):
        read_seeds(path)
    path.write_text(json.dumps({"instruction": "Q?", "metadata": {"difficulty": 1}}) + "\n")
    with pytest.raises(SeedError, match=r"s.jsonl:1: field 'metadata' has no 'source_dataset'"):
        read_seeds(path)


def test_the_config_section_draws_seed_tasks() -> None:
    section = ProceduralSeeds.model_validate({"datasets": ["chain_sum"], "count": 2, "seed": 3})
    tasks = procedural_seed_tasks(section)
    assert [t.id for t in tasks] == ["chain_sum-3-0", "chain_sum-3-1"] and tasks[0].family == "chain_sum"
    with pytest.raises(ValidationError, match="extra"):
        ProceduralSeeds.model_validate({"datasets": [], "size": 2})


def _ptf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptfactory", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )


def test_ptf_seeds_procedural(tmp_path: Path) -> None:
    done = _ptf(
        "seeds", "procedural", "chain_sum,basic_arithmetic", "--count", "3", "--out", "p.jsonl", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "6 tasks from 2 families" in done.stderr
    tasks = read_seeds(tmp_path / "p.jsonl")  # a valid seed file
    assert [t.family for t in tasks] == ["chain_sum"] * 3 + ["basic_arithmetic"] * 3
    bad = _ptf("seeds", "procedural", "chain_sum,chain_summ", "--out", "q.jsonl", cwd=tmp_path)
    assert bad.returncode == 2 and not (tmp_path / "q.jsonl").exists()
    assert bad.stderr.strip().count("\n") == 0  # one line
    assert "unknown procedural family 'chain_summ'; did you mean chain_sum" in bad.stderr
