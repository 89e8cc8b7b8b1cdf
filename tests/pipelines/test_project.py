"""Where `ptf` works: inside a project (found at or above the current folder), with the Dagster
instance that belongs to its PTF_HOME; outside one it says so and `ptf init` makes one."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.instance.ref import InstanceRef

from tests.conftest import REPO

Ptf = Callable[..., subprocess.CompletedProcess[str]]


def test_outside_a_project_ptf_says_so_and_writes_nothing(ptf: Ptf, tmp_path: Path) -> None:
    empty = tmp_path / "not-a-project"
    empty.mkdir()
    for argv in (["run", "--seeds", "x.jsonl"], ["annotate", "push"], ["datasets", "list"], ["ui"]):
        result = ptf(*argv, cwd=empty, timeout=120)
        assert result.returncode == 2, (argv, result.stderr)
        assert "is not inside a ptfactory project" in result.stderr and "ptf init DIR" in result.stderr
        assert "Traceback" not in result.stderr
    assert list(empty.iterdir()) == []  # no stray .ptf/dagster
    # the data commands work anywhere once PTF_HOME says where the data is
    listed = ptf("datasets", "list", cwd=empty, env={"PTF_HOME": str(tmp_path / "home")}, timeout=120)
    assert listed.returncode == 0 and "no datasets published yet" in listed.stdout
    helped = ptf("run", "--help", cwd=empty, timeout=120)
    assert helped.returncode == 0 and "--seeds" in helped.stdout


def test_init_scaffolds_a_project_that_ptf_accepts(ptf: Ptf, tmp_path: Path) -> None:
    from ptfactory.config import load_config
    from ptfactory.generators.seeds import read_seeds

    outside = tmp_path / "outside"
    outside.mkdir()
    made = ptf("init", "new-factory", cwd=outside, timeout=120)
    assert made.returncode == 0, made.stderr
    root = outside / "new-factory"
    assert {p.name for p in root.iterdir()} == {"factory.yaml", "dagster.yaml", "seeds", ".gitignore"}
    assert ".ptf/" in (root / ".gitignore").read_text().splitlines()
    load_config(root / "factory.yaml", required=True)  # valid, with its comments
    assert "#" in (root / "factory.yaml").read_text()
    assert yaml.safe_load((root / "dagster.yaml").read_text())["telemetry"] == {"enabled": False}
    assert len(list(read_seeds(root / "seeds" / "example.jsonl"))) >= 3
    # the scaffold is the repository's own configuration, not a copy that drifts
    assert (root / "factory.yaml").read_text() == (REPO / "factory.yaml").read_text()
    assert (root / "dagster.yaml").read_text() == (REPO / "dagster.yaml").read_text()

    inside = ptf("datasets", "list", cwd=root / "seeds", timeout=120)  # found from a subfolder
    assert inside.returncode == 0, inside.stderr
    again = ptf("init", "new-factory", cwd=outside, timeout=120)
    assert again.returncode == 2 and "already holds a project" in again.stderr


def _batches(dagster_home: Path) -> list[str]:
    cwd = Path.cwd()
    os.chdir(dagster_home)  # the project's dagster.yaml has paths relative to its folder
    try:
        with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(dagster_home))) as instance:
            return list(instance.get_dynamic_partitions("batch"))
    finally:
        os.chdir(cwd)


def test_the_instance_follows_ptf_home_and_push_skips_batches_without_outputs(
    ptf: Ptf, project: Path, seeds_file: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-home"
    ran = ptf("run", "--seeds", str(seeds_file), "--batch", "elsewhere", env={"PTF_HOME": str(other)})
    assert ran.returncode == 0, ran.stderr[-3000:]
    # the run, its partition and its outputs are all in the other home
    assert _batches(other / "dagster") == ["elsewhere"]
    assert (other / "assets" / "routed_samples" / "elsewhere.parquet").is_file()
    assert _batches(project) == []
    # so the project's own home has nothing of it to push (this aborted on the first such batch)
    pushed = ptf("annotate", "push", timeout=300)
    assert pushed.returncode == 0, pushed.stderr[-3000:]
    assert "0 tasks created" in pushed.stdout

    # an instance that knows a batch whose outputs are elsewhere (mixed before instances followed
    # their homes): push names it and goes on
    os.chdir(project)
    try:
        with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(project))) as instance:
            instance.add_dynamic_partitions("batch", ["elsewhere"])
    finally:
        os.chdir(REPO)
    pushed = ptf("annotate", "push", timeout=300)
    assert pushed.returncode == 0, pushed.stderr[-3000:]
    assert "skipped batch elsewhere: no stored routed_samples" in pushed.stderr


@pytest.mark.parametrize("remote", [False, True])
def test_instance_home_per_ptf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote: bool) -> None:
    from ptfactory.pipelines.instance import instance_home

    root = tmp_path / "project"
    root.mkdir()
    (root / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    monkeypatch.chdir(root)
    monkeypatch.delenv("PTF_HOME", raising=False)
    assert instance_home(root) == root  # the project's own home: its dagster.yaml as it is
    monkeypatch.setenv("PTF_HOME", "s3://bucket/homes/a" if remote else str(tmp_path / "a"))
    first = instance_home(root)
    monkeypatch.setenv("PTF_HOME", "s3://bucket/homes/b" if remote else str(tmp_path / "b"))
    second = instance_home(root)
    assert first not in (second, root)
    config = yaml.safe_load((first / "dagster.yaml").read_text())
    assert config["storage"]["sqlite"]["base_dir"] == str(first / "storage")
    assert config["concurrency"] == yaml.safe_load((REPO / "dagster.yaml").read_text())["concurrency"]
