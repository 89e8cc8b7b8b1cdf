"""`ptf decontaminate`: a table file against the shipped index, bad input, and a published version
re-checked and its colliding rows retracted."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ptfactory.filters.decontamination.sources import builtin_items
from tests.conftest import PTF


def _ptf(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PTF_HOME": str(cwd / ".ptf"),
        "DAGSTER_HOME": str(cwd / ".ptf" / "dagster"),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [*PTF, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "factory.yaml").write_text("{}\n")
    return tmp_path


def _rows() -> list[dict[str, str]]:
    gsm = builtin_items("gsm8k-test")[21].texts[0]
    return [
        {
            "prompt": "Write a limerick about a lighthouse keeper who collects teapots.",
            "answer": "There once...",
        },
        {"prompt": gsm, "answer": "Let me think step by step."},
        {
            "prompt": "Explain what a B-tree is to a first-year student in two paragraphs.",
            "answer": "A B-tree...",
        },
    ]


def test_file_rows_that_quote_a_benchmark_are_dropped(project: Path) -> None:
    (project / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    ran = _ptf(project, "decontaminate", "rows.jsonl", "--out", "clean.jsonl", "--dropped", "hits.jsonl")
    assert ran.returncode == 0, ran.stderr
    kept = [json.loads(x) for x in (project / "clean.jsonl").read_text().splitlines()]
    assert [r["prompt"][:10] for r in kept] == ["Write a li", "Explain wh"]
    hits = [json.loads(x) for x in (project / "hits.jsonl").read_text().splitlines()]
    assert hits[0]["decont_item"] == "gsm8k-test/21" and "gsm8k-test/21" in ran.stderr


@pytest.mark.parametrize(
    ("content", "name", "expected"),
    [
        (None, "missing.jsonl", "no such file"),
        ("{not json\n", "broken.jsonl", "not a readable JSONL file"),
        ('{"a": 1}\n', "rows.jsonl", "no column 'text'"),
        ("x", "rows.csv", "unsupported file type"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    project: Path, content: str | None, name: str, expected: str
) -> None:
    if content is not None:
        (project / name).write_text(content)
    ran = _ptf(project, "decontaminate", name, "--out", "out.parquet", "--text-column", "text")
    assert ran.returncode == 2
    assert len(ran.stderr.strip().splitlines()) == 1 and expected in ran.stderr
    assert not (project / "out.parquet").exists()


def test_published_version_recheck_lists_rows_ready_to_retract(project: Path) -> None:
    chats = [
        {
            "messages": [
                {"role": "user", "content": r["prompt"]},
                {"role": "assistant", "content": r["answer"]},
            ]
        }
        for r in _rows()
    ]
    (project / "chats.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chats))
    # the publish audit refuses a version holding a benchmark item, imports too
    refused = _ptf(project, "datasets", "import", "chats.jsonl", "--name", "byod")
    assert refused.returncode == 2 and "no_benchmark_overlap" in refused.stderr
    assert "gsm8k-test/21" in refused.stderr
    # a version published before the item was indexed (here: with the check off) is re-checked later
    legacy = project / "legacy.yaml"
    legacy.write_text("decontamination: {enabled: false}\n")
    imported = _ptf(project, "datasets", "import", "chats.jsonl", "--name", "byod", "--config", str(legacy))
    assert imported.returncode == 0, imported.stderr
    ran = _ptf(project, "decontaminate", "byod@v1", "--out", "ids.txt")
    assert ran.returncode == 0, ran.stderr
    ids = (project / "ids.txt").read_text().split()
    assert len(ids) == 1 and "gsm8k-test/21" in ran.stdout and "ptf datasets retract byod@v1" in ran.stdout
    retracted = _ptf(
        project, "datasets", "retract", "byod@v1", "--samples", "ids.txt", "--reason", "contaminated"
    )
    assert retracted.returncode == 0, retracted.stderr
    again = _ptf(project, "decontaminate", "byod@v2", "--json")
    assert json.loads(again.stdout)["contaminated"] == []
