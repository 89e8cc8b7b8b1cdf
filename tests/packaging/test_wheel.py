"""The package as a user installs it: one import root, `ptfactory`, and nothing generic beside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

# the stage folders at the top of the repository; installed, they exist only as ptfactory.<name>
STAGE_PACKAGES = (
    "annotators",
    "assets",
    "engines",
    "filters",
    "generators",
    "pipelines",
    "storage",
    "training",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from the files git tracks, copied with their links (a file left out of git is left out
    here too, and no stale build/ of the checkout leaks in)."""
    out = tmp_path_factory.mktemp("dist")
    tree = tmp_path_factory.mktemp("tree")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source, target = REPO / name, tree / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree, not yet in git
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(tree),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (built,) = out.glob("ptfactory-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv holding only the wheel; its dependencies come from ours through a .pth line (a
    plain path: the .pth files of our venv, the editable install's finder among them, do not run)."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "_ptf_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    return venv


def test_the_wheel_installs_one_top_level_name(wheel: Path) -> None:
    names = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert {n for n in names if not n.endswith(".dist-info")} == {"ptfactory"}
    inside = {n.split("/")[1] for n in zipfile.ZipFile(wheel).namelist() if n.startswith("ptfactory/")}
    assert set(STAGE_PACKAGES) <= inside
    # templates and the sandbox's runner travel with the code
    listing = zipfile.ZipFile(wheel).namelist()
    assert "ptfactory/filters/execution/runner.py" in listing
    assert any(n.startswith("ptfactory/generators/templates/") and n.endswith(".jinja") for n in listing)
    # what `ptf init` scaffolds
    for name in ("factory.yaml", "dagster.yaml", "example-seeds.jsonl"):
        assert f"ptfactory/pipelines/scaffold/{name}" in listing


def test_the_installed_package_loads_from_the_venv_with_no_bare_modules(
    fresh_venv: Path, tmp_path: Path
) -> None:
    code = (
        "import json, sys\n"
        "import ptfactory, ptfactory.pipelines.definitions, ptfactory.pipelines.cli\n"
        f"bare = sorted(m for m in sys.modules if m.split('.')[0] in {STAGE_PACKAGES!r})\n"
        "print(json.dumps({'file': ptfactory.pipelines.definitions.__file__, 'bare': bare}))\n"
    )
    result = subprocess.run(
        [str(fresh_venv / "bin" / "python"), "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["file"].startswith(str(fresh_venv)), found["file"]
    assert found["bare"] == []


def test_dagster_validates_the_code_location_of_the_installed_package(
    fresh_venv: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    result = subprocess.run(
        [
            str(fresh_venv / "bin" / "python"),
            "-m",
            "dagster",
            "definitions",
            "validate",
            "-m",
            "ptfactory.pipelines.definitions",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "Validation successful for code location ptfactory.pipelines.definitions"
        in result.stderr + result.stdout
    )


def test_importing_every_module_leaves_no_bare_top_level_name() -> None:
    """Two copies of one module (``storage.x`` beside ``ptfactory.storage.x``) are the classic bug of
    a folder mapping; import every module of the package and look for any bare name."""
    code = (
        "import json, pkgutil, sys, importlib\n"
        "import ptfactory\n"
        "for info in pkgutil.walk_packages(ptfactory.__path__, 'ptfactory.'):\n"
        "    if info.name.endswith(('__main__', 'execution.runner', 'engines.worker')):\n"
        "        continue\n"
        "    importlib.import_module(info.name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {STAGE_PACKAGES!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
