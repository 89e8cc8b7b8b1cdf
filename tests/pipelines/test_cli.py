"""The `ptf` CLI as a user runs it: a subprocess in a project folder."""

import itertools
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

Ptf = Callable[..., subprocess.CompletedProcess[str]]


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_run_publishes_pulls_and_explains(
    ptf: Ptf, project: Path, seeds_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _ok(ptf("run", "--seeds", str(seeds_file)))
    assert "published sft@v1 (" in first.stdout
    # the summary says what the panel did: the verifiers' verdicts and each judge's batch weight
    assert "verifiers: " in first.stdout and "judge tiny: weight " in first.stdout
    listed = json.loads(_ok(ptf("datasets", "list", "--json")).stdout)
    assert [(d["dataset"], d["version"]) for d in listed] == [("sft", "v1")]
    assert listed[0]["rows"] >= 2  # the two reference answers, plus what the tiny model wrote
    assert Path(listed[0]["path"]) == project / ".ptf" / "datasets" / "sft" / "v1"

    again = _ok(ptf("run", "--seeds", str(seeds_file)))
    assert "unchanged, still sft@v1" in again.stdout

    pulled = _ok(ptf("pull", "sft@latest", "--to", str(tmp_path / "pulled")))
    assert "verified" in pulled.stdout
    shards = sorted(p.name for p in (tmp_path / "pulled").glob("*.parquet"))
    manifest = json.loads((project / ".ptf/datasets/sft/v1/manifest.json").read_text())
    assert shards == sorted(s["file"] for s in manifest["shards"]) and shards
    from ptfactory.filters.dedup.minhash import SHINGLE_HASH

    assert manifest["stats"]["dedup"]["shingle_hash"] == SHINGLE_HASH  # which hash built its signatures
    refused = ptf("pull", "sft@latest", "--to", str(tmp_path / "pulled"))
    assert refused.returncode == 2 and "is not empty" in refused.stderr and "--force" in refused.stderr
    _ok(ptf("pull", "sft@latest", "--to", str(tmp_path / "pulled"), "--force"))
    _ok(ptf("pull", "sft@latest", "--to", str(tmp_path / "messages"), "--columns", "messages"))
    receipt = json.loads((tmp_path / "messages" / "ptf_pull.json").read_text())
    assert receipt["columns"] == ["messages"] and receipt["version"] == 1

    _ok(ptf("datasets", "tag", "sft@v1", "stable"))
    shown = json.loads(_ok(ptf("datasets", "show", "sft@stable", "--json")).stdout)
    assert shown["version"] == 1 and shown["aliases"] == ["stable"]

    import pyarrow.parquet as pq

    published = [r for name in shards for r in pq.read_table(tmp_path / "pulled" / name).to_pylist()]
    sid = next(r["sample_id"] for r in published if r["provenance"]["method"] == "reference")
    story = json.loads(_ok(ptf("lineage", sid[:10], "--json")).stdout)
    assert story["sample_id"] == sid
    assert story["versions"][0]["dataset"] == "sft" and story["versions"][0]["version"] == 1
    assert story["record"]["decisions"][0]["stage"] == "seed"
    assert {s["asset"] for s in story["stages"]} >= {"seed_tasks", "candidate_responses"}
    human = _ok(ptf("lineage", sid)).stdout
    assert "published in" in human and "seed_tasks" in human

    # the runs are in the project's Dagster instance, where `ptf ui` shows them
    from dagster._core.instance.ref import InstanceRef

    monkeypatch.chdir(project)  # dagster.yaml paths are relative to the project root

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(project))) as instance:
        runs = instance.get_runs()
        assert len(runs) == 2
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert instance.get_dynamic_partitions("batch") == [runs[0].tags["ptf/batch"]]


def test_instruction_only_rows_are_left_out_with_a_reason(ptf: Ptf, seeds_file: Path) -> None:
    _ok(ptf("run", "--seeds", str(seeds_file)))
    story = json.loads(_ok(ptf("lineage", "--json", _instruction_only_id(seeds_file))).stdout)
    assert story["versions"] == []
    assert story["record"]["decisions"][0]["reason"] == "instruction_only"
    assert story["record"]["decisions"][-1] == {
        "stage": "generate",
        "verdict": "keep",
        "reason": "seed",
        "detail": None,
    }


def _instruction_only_id(seeds_file: Path) -> str:
    from ptfactory.generators.seeds import read_seeds

    return next(t.sample_id for t in read_seeds(seeds_file) if t.response is None)


def test_runs_from_a_subdirectory_of_the_project(ptf: Ptf, project: Path, seeds_file: Path) -> None:
    sub = project / "notebooks"
    sub.mkdir()
    _ok(ptf("run", "--seeds", str(seeds_file), cwd=sub))
    assert (project / ".ptf" / "datasets" / "sft" / "v1" / "manifest.json").exists()
    assert not (sub / ".ptf").exists()


BAD_SEEDS = {
    "malformed_jsonl": (
        b'{"instruction": "a", "response": "b"}\n{"instruction": \n',
        "seeds.jsonl:2: not valid JSON",
    ),
    "non_utf8": (b'{"instruction": "a\xff", "response": "b"}\n', "seeds.jsonl:1: not valid UTF-8"),
    "empty_instruction": (b'{"instruction": "", "response": "b"}\n', "field 'instruction' is empty"),
    "missing_field": (b'{"response": "b"}\n', "field 'instruction' is missing"),
    "one_mb_field": (
        b'{"instruction": "a", "response": "' + b"x" * 1_048_576 + b'"}\n',
        "field 'response' is 1,048,576 characters",
    ),
    "duplicates": (
        b'{"instruction": "a", "response": "b"}\n{"instruction": "a", "response": "b"}\n',
        "duplicate seed",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SEEDS))
def test_bad_seeds_exit_2_and_publish_nothing(ptf: Ptf, project: Path, tmp_path: Path, case: str) -> None:
    content, message = BAD_SEEDS[case]
    path = tmp_path / "seeds.jsonl"
    path.write_bytes(content)
    result = ptf("run", "--seeds", str(path))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (project / ".ptf" / "datasets").exists()
    assert not (project / ".ptf" / "seeds").exists()


def test_unknown_config_key_exits_2(ptf: Ptf, project: Path, seeds_file: Path) -> None:
    (project / "factory.yaml").write_text("storage:\n  shard_row: 10\n")
    result = ptf("run", "--seeds", str(seeds_file))
    assert result.returncode == 2
    assert (
        "factory.yaml: unknown key 'storage.shard_row'; allowed under 'storage': shard_rows" in result.stderr
    )
    assert not (project / ".ptf" / "datasets").exists()


def test_pull_of_corrupt_version_exits_nonzero_naming_the_shard(
    ptf: Ptf, project: Path, seeds_file: Path, tmp_path: Path
) -> None:
    _ok(ptf("run", "--seeds", str(seeds_file)))
    shard = sorted((project / ".ptf/datasets/sft/v1").glob("*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[:-10] + b"0123456789")
    result = ptf("pull", "sft@v1", "--to", str(tmp_path / "out"))
    assert result.returncode == 1
    assert f"{shard.name} is corrupt" in result.stderr
    missing = ptf("pull", "sft@v4", "--to", str(tmp_path / "out"))
    assert missing.returncode == 2 and "has no version v4" in missing.stderr


def _leaf_commands() -> list[list[str]]:
    """Every command of the real app, walked from its click tree (a new command is covered too)."""
    import typer.main

    from ptfactory.pipelines.cli import app

    found: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            found.append(path)

    walk(typer.main.get_command(app), [])
    return found


def test_every_command_has_help_that_names_its_arguments_and_an_example() -> None:
    import click
    import typer.main
    from typer.testing import CliRunner

    from ptfactory.pipelines.cli import app

    commands = _leaf_commands()
    assert len(commands) >= 20
    runner = CliRunner()
    root = typer.main.get_command(app)
    for path in commands:
        result = runner.invoke(
            app, [*path, "--help"], prog_name="ptf", env={"COLUMNS": "200", "NO_COLOR": "1"}
        )
        assert result.exit_code == 0, (path, result.output)
        text = result.output
        name = " ".join(path)
        command: Any = root
        for part in path:
            command = command.commands[part]
        assert f"Usage: ptf {name}" in text, text
        for param in command.params:
            if isinstance(param, click.Argument) or getattr(param, "param_type_name", "") == "argument":
                metavar = param.metavar or param.name.upper()
                assert metavar in text, f"`ptf {name} --help` does not name its argument {metavar}"
            else:
                assert param.opts[0] in text, f"`ptf {name} --help` does not list {param.opts[0]}"
        assert re.search(rf"Examples?: `ptf {re.escape(name)}[ `]", text), (
            f"`ptf {name} --help` gives no example of itself"
        )
        # on an 80-column terminal the prose fills its lines: the source's line breaks left a stub
        # of a few words at the end of each one ("... with the file,\n line and\n field, ...")
        narrow = runner.invoke(
            app, [*path, "--help"], prog_name="ptf", env={"COLUMNS": "80", "NO_COLOR": "1"}
        )
        prose = [line.strip() for line in narrow.output.split("╭")[0].splitlines()[2:]]
        for line, following in itertools.pairwise(prose):
            if line and following and not line.startswith(("- ", "* ", "|")):
                assert len(line) >= 40, f"`ptf {name} --help` at 80 columns: a stub line {line!r}"


def test_doctor_reports_what_is_really_there(ptf: Ptf, project: Path, tmp_path: Path) -> None:
    import socket
    import subprocess as sp

    from tests.integration.conftest import free_port

    port = free_port()
    (project / "factory.yaml").write_text(
        (project / "factory.yaml").read_text() + f"annotation: {{port: {port}}}\n"
    )

    def checks(**env: str) -> dict[str, dict[str, str]]:
        return {c["component"]: c for c in json.loads(_ok(ptf("doctor", "--json", env=env)).stdout)}

    found = checks()
    engine = sp.run(
        ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True, check=False
    )
    assert (found["docker engine"]["status"] == "ok") == (engine.returncode == 0)
    assert found["project"] == {"component": "project", "status": "ok", "detail": str(project)}
    assert found["dagster instance"]["status"] == "ok"
    assert found["dagster instance"]["detail"].startswith(f"{project}/dagster.yaml")
    assert found["label studio"]["status"] == "off" and f":{port}" in found["label studio"]["detail"]
    with socket.socket() as listener:  # something answers on the configured port now
        listener.bind(("127.0.0.1", port))
        listener.listen()
        assert checks()["label studio"]["status"] == "ok"
    # another home: the instance and PTF_HOME shown are that home's
    other = checks(PTF_HOME=str(tmp_path / "other"))
    assert other["PTF_HOME"]["detail"] == str(tmp_path / "other")
    assert other["dagster instance"]["detail"].startswith(str(tmp_path / "other" / "dagster"))
    outside = json.loads(_ok(ptf("doctor", "--json", cwd=tmp_path)).stdout)
    assert {c["component"]: c["status"] for c in outside}["project"] == "missing"


def test_run_under_a_parent_that_ignores_sigterm_ends_and_leaves_no_tails(
    project: Path, seeds_file: Path
) -> None:
    """An ignored SIGTERM is inherited; Dagster stops its compute-log tails with SIGTERM. Before
    ptf took SIGTERM's default back, this run's tails outlived it holding its stdout, and reading
    that pipe to its end (as here) never returned."""
    import os
    import signal
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("PTF_HOME", "DAGSTER_HOME")}
    result = subprocess.run(
        [sys.executable, "-m", "ptfactory", "run", "--seeds", str(seeds_file)],
        cwd=project,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "published sft@v1 (" in result.stdout
    left = []
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = status.read_bytes().split(b"\0")
        except OSError:  # the process ended meanwhile
            continue
        if argv[0].endswith(b"tail") and str(project).encode() in b" ".join(argv):
            left.append(argv)
    assert not left, left
