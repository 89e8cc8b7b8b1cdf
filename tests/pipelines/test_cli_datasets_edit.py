"""`ptf datasets retract|diff|import`, in-process (typer's CliRunner) plus one real `ptf` subprocess."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ptfactory.errors import FactoryError
from ptfactory.pipelines.cli import _app, app
from ptfactory.storage.versions import DatasetStore
from tests.conftest import PTF


@dataclass
class Ran:
    code: int
    out: str
    error: str  # the one line `ptf` prints for a FactoryError


Cli = Callable[..., Ran]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "factory.yaml").write_text("datasets: {validation_fraction: 0.25}\n")
    monkeypatch.setenv("PTF_HOME", str(root / ".ptf"))
    monkeypatch.setenv("DAGSTER_HOME", str(root / ".ptf" / "dagster"))
    monkeypatch.chdir(root)
    monkeypatch.setattr(_app, "CWD", root)  # where relative paths on the command line start
    return root


@pytest.fixture
def cli(project: Path) -> Cli:
    """Run `ptf ARGS` in-process; a FactoryError gets the exit code and message `ptf` gives it."""

    def run(*args: str) -> Ran:
        result = CliRunner().invoke(app, list(args), prog_name="ptf", env={"COLUMNS": "200", "NO_COLOR": "1"})
        if isinstance(result.exception, FactoryError):
            return Ran(result.exception.exit_code, result.stdout, str(result.exception))
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Ran(result.exit_code, result.stdout, "")

    return run


def _ok(ran: Ran) -> Ran:
    assert ran.code == 0, (ran.out, ran.error)
    return ran


def _chat(question: str, answer: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def _sft_parquet(path: Path, count: int = 12) -> Path:
    messages = [_chat(f"What is {i} times 3?", f"{3 * i}.") for i in range(count)]
    pq.write_table(pa.table({"messages": messages, "id": list(range(count))}), path)
    return path


def test_import_trl_sft_parquet_publishes_a_version_that_pull_reads(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    source = _sft_parquet(project / "chats.parquet", 40)
    ran = _ok(cli("datasets", "import", "chats.parquet", "--name", "byod"))
    assert "imported 40 row(s) from chats.parquet (messages, sft) -> published byod@v1 (train" in ran.out
    assert "ignored columns: id" in ran.out
    manifest = DatasetStore().resolve("byod@v1")
    assert manifest.kind == "sft" and set(manifest.splits) == {"train", "validation"}
    digest = json.loads(_ok(cli("datasets", "show", "byod@v1", "--json")).out)["config_hash"]
    assert digest.startswith("import:") and len(digest) == len("import:") + 64
    assert manifest.stats["import"]["source"] == str(source) and manifest.stats["import"]["rows"] == 40
    assert manifest.batches == [f"import-{digest.removeprefix('import:')[:12]}"]
    _ok(cli("pull", "byod@v1", "--to", str(tmp_path / "pulled")))
    pulled = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / "pulled").glob("*.parquet"))])
    assert pulled.num_rows == 40
    assert {p["method"] for p in pulled.column("provenance").to_pylist()} == {"import"}
    again = _ok(cli("datasets", "import", str(source), "--name", "byod"))
    assert "unchanged, still byod@v1" in again.out


def test_import_trl_preference_jsonl_with_both_prompt_forms(cli: Cli, project: Path) -> None:
    rows = [
        {"prompt": "Name a colour.", "chosen": "Blue.", "rejected": "Seven."},
        {
            "prompt": [{"role": "user", "content": "Say hi."}],
            "chosen": [{"role": "assistant", "content": "Hi!"}],
            "rejected": [{"role": "assistant", "content": "No."}],
        },
    ]
    (project / "prefs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    body = json.loads(_ok(cli("datasets", "import", "prefs.jsonl", "--name", "pairs", "--json")).out)
    assert body["version"] == "pairs@v1" and body["kind"] == "preference" and body["rows"] == 2
    table = DatasetStore().read("pairs@v1")
    assert set(table.column("kind").to_pylist()) == {"preference"}
    assert sorted(m[0]["content"] for m in table.column("messages").to_pylist()) == [
        "Name a colour.",
        "Say hi.",
    ]
    clash = cli("datasets", "import", "prefs.jsonl", "--name", "pairs", "--kind", "sft")
    assert (
        clash.code == 2
        and "has preference columns (prompt, chosen, rejected) but --kind is sft" in clash.error
    )
    _sft_parquet(project / "chats.parquet")
    other = cli("datasets", "import", "chats.parquet", "--name", "pairs")
    assert other.code == 2 and "pairs@v1 holds preference rows and chats.parquet sft rows" in other.error
    assert DatasetStore().versions("pairs") == [1]


def test_import_of_full_records_keeps_them(cli: Cli, project: Path, rows: Callable[..., pa.Table]) -> None:
    pq.write_table(pa.concat_tables([rows(6, "b1"), rows(3, "b2", start=50)]), project / "export.parquet")
    _ok(cli("datasets", "import", "export.parquet", "--name", "copy"))
    manifest = DatasetStore().resolve("copy@latest")
    assert manifest.batches == ["b1", "b2"] and manifest.rows == 9
    table = DatasetStore().read("copy@v1")
    assert {p["method"] for p in table.column("provenance").to_pylist()} == {"import"}


def test_import_of_an_unknown_shape_exits_2_and_publishes_nothing(project: Path) -> None:
    """The real `ptf`, as a user runs it: one red line, exit 2."""
    pq.write_table(pa.table({"question": ["Q?"], "answer": ["A."]}), project / "qa.parquet")
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"} | {"COLUMNS": "300", "NO_COLOR": "1"}
    result = subprocess.run(
        [*PTF, "datasets", "import", "qa.parquet", "--name", "qa"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: qa.parquet fits no accepted shape: its columns are question, answer; accepted: TRL `messages`"
    )
    assert DatasetStore().versions("qa") == []


def test_import_of_a_bad_row_exits_2_naming_the_row(cli: Cli, project: Path) -> None:
    lines = [{"messages": _chat("Q1", "A1")}, {"messages": _chat("Q2", "A2")}]
    lines.append({"messages": [{"role": "user", "content": "Q3"}, {"role": "assistant", "content": None}]})
    (project / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    ran = cli("datasets", "import", "bad.jsonl", "--name", "bad")
    assert ran.code == 2 and ran.error == "bad.jsonl, row 3: messages[1] (assistant) has no content"
    assert DatasetStore().versions("bad") == []


def _publish_two_batches(cli: Cli, project: Path, rows: Callable[..., pa.Table]) -> pa.Table:
    table = pa.concat_tables([rows(12, "b1"), rows(8, "b2", start=100)])
    pq.write_table(table, project / "records.parquet")
    _ok(cli("datasets", "import", "records.parquet", "--name", "sft"))
    return table


def test_retract_a_batch_and_samples_then_diff_and_lineage_show_it(
    cli: Cli, project: Path, rows: Callable[..., pa.Table]
) -> None:
    table = _publish_two_batches(cli, project, rows)
    ran = _ok(
        cli("datasets", "retract", "sft@v1", "--batch", "b2", "--reason", "judge outage", "--by", "alice")
    )
    assert "retracted 8 row(s) from sft@v1 -> published sft@v2" in ran.out
    v2 = DatasetStore().resolve("sft@v2")
    assert (
        v2.rows == 12
        and v2.batches == ["b1"]
        and set(v2.splits) == set(DatasetStore().resolve("sft@v1").splits)
    )
    assert (
        v2.retraction is not None
        and v2.retraction["by"] == "alice"
        and v2.retraction["reason"] == "judge outage"
    )

    doomed = sorted(DatasetStore().read("sft@v2").column("sample_id").to_pylist())[:2]
    (project / "ids.txt").write_text("\n".join(doomed) + "\n")
    _ok(cli("datasets", "retract", "sft@latest", "--samples", "ids.txt", "--reason", "leaked answers"))
    v3 = DatasetStore().resolve("sft@v3")
    assert v3.rows == 10 and v3.retraction is not None and v3.retraction["sample_ids"] == doomed
    assert v3.retraction["by"] == (os.environ.get("USER") or "unknown")

    found = json.loads(_ok(cli("datasets", "diff", "sft@v1", "sft@v3", "--json", "--limit", "3")).out)
    assert (found["added"], found["removed"], found["unchanged"]) == (0, 10, 10)
    assert found["removed_by_batch"] == {"b1": 2, "b2": 8} and len(found["removed_ids"]) == 3
    text = _ok(cli("datasets", "diff", "sft@v2", "sft@v3")).out
    assert "+0 added, -2 removed, 10 unchanged" in text and all(i in text for i in doomed)
    assert "sft@v3 is a retraction from v2 by" in text and "leaked answers" in text

    b2_id = table.filter(pc.equal(table.column("batch"), "b2")).column("sample_id")[0].as_py()
    story = json.loads(_ok(cli("lineage", b2_id, "--json")).out)
    [item] = story["retractions"]
    assert (item["version"], item["effect"], item["matched"], item["by"]) == (
        2,
        "dropped",
        "batch b2",
        "alice",
    )
    human = _ok(cli("lineage", doomed[0])).out
    assert "retracted dropped from sft@v3" in human and "leaked answers" in human


def test_a_retraction_that_matches_nothing_exits_2_and_publishes_nothing(
    cli: Cli, project: Path, rows: Callable[..., pa.Table]
) -> None:
    _publish_two_batches(cli, project, rows)
    ran = cli("datasets", "retract", "sft@v1", "--batch", "b9", "--reason", "typo")
    assert ran.code == 2
    assert (
        ran.error
        == "sft@v1 has no row to retract: no row matches batch b9; its batches: b1, b2 (nothing published)"
    )
    no_reason = cli("datasets", "retract", "sft@v1", "--batch", "b1")
    assert no_reason.code == 2 and "--reason TEXT is required" in no_reason.error
    missing = cli("datasets", "retract", "nope@v1", "--batch", "b1", "--reason", "r")
    assert missing.code == 2 and "no dataset named 'nope' has been published" in missing.error
    assert DatasetStore().versions("sft") == [1]


def test_a_reimport_leaves_retracted_rows_out(cli: Cli, project: Path) -> None:
    _sft_parquet(project / "chats.parquet", 10)
    _ok(cli("datasets", "import", "chats.parquet", "--name", "byod"))
    doomed = sorted(DatasetStore().read("byod@v1").column("sample_id").to_pylist())[:3]
    (project / "ids.txt").write_text("\n".join(doomed))
    _ok(cli("datasets", "retract", "byod@v1", "--samples", "ids.txt", "--reason", "bad"))
    _sft_parquet(project / "chats.parquet", 12)  # the same rows and two more
    ran = _ok(cli("datasets", "import", "chats.parquet", "--name", "byod"))
    assert "imported 9 row(s)" in ran.out and "3 row(s) left out: retracted from byod earlier" in ran.out
    assert not set(DatasetStore().read("byod@v3").column("sample_id").to_pylist()) & set(doomed)


def test_an_import_whose_rows_leak_across_the_split_is_refused(cli: Cli, project: Path) -> None:
    rng = random.Random(7)
    words = [f"w{n}" for n in range(400)]
    questions = [" ".join(rng.choices(words, k=30)) for _ in range(20)]
    # each question twice: once as asked, once with a word more (distinct ids, near-identical text)
    messages = [_chat(q, f"Answer: {q}") for q in questions] + [
        _chat(q, f"Answer: {q} indeed") for q in questions
    ]
    pq.write_table(pa.table({"messages": messages}), project / "copies.parquet")
    ran = cli("datasets", "import", "copies.parquet", "--name", "byod")
    assert ran.code == 2
    assert "no_split_leak" in ran.error and "rows:" in ran.error
    assert DatasetStore().versions("byod") == []
    assert not list((project / ".ptf").rglob("*.parquet"))


def test_import_help_names_every_kind_the_importer_takes(cli: Cli) -> None:
    from ptfactory.storage.importer import DATASET_KINDS

    text = " ".join(cli("datasets", "import", "--help").out.split())  # rich wraps the help
    kinds = next(line for line in text.split("--kind")[1:] if "default" in line)
    assert set(DATASET_KINDS) <= set(re.findall(r"[a-z]+", kinds.split("(")[0])), kinds
    assert "prompt+answer (rl)" in text


def test_a_retraction_landing_during_an_import_is_not_undone(
    cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic interleaving: the import reads the retractions, then (before it publishes) a
    `ptf datasets retract` lands. The publish checks its base under the lock, the import reads the
    retractions again, and the retracted rows stay out."""
    from ptfactory.storage import retract as retract_module

    _sft_parquet(project / "chats.parquet", 10)
    _ok(cli("datasets", "import", "chats.parquet", "--name", "byod"))
    doomed = sorted(DatasetStore().read("byod@v1").column("sample_id").to_pylist())[:3]
    real = retract_module.retracted
    calls: list[int] = []

    def racing(store: DatasetStore, name: str) -> retract_module.Retracted:
        found = real(store, name)
        if not calls:  # the first read: a retraction lands right after it, before the publish
            retract_module.retract(store, "byod@v1", [], doomed, reason="leaked", by="bob")
        calls.append(1)
        return found

    monkeypatch.setattr(retract_module, "retracted", racing)
    _sft_parquet(project / "chats.parquet", 12)  # the same rows and two more
    ran = _ok(cli("datasets", "import", "chats.parquet", "--name", "byod"))
    assert len(calls) == 2  # read again after the publish found v2 under it
    assert "imported 9 row(s)" in ran.out
    latest = DatasetStore().read("byod@latest").column("sample_id").to_pylist()
    assert len(latest) == 9 and not set(latest) & set(doomed)
