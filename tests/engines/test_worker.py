"""The engine worker imports ptfactory from a private folder made for it, never from a fixed path in
/tmp that another user could have made first (issue 39, item 6)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import ptfactory
from ptfactory.engines import worker
from ptfactory.engines.worker import WorkerClient

# where the worker used to link the package, reusing whatever it found there
OLD = Path(tempfile.gettempdir()) / f"ptf-worker-path-{os.getuid()}"


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[Path]:
    """A ``ptfactory`` at the old path whose worker module leaves a mark when imported."""
    aside = None
    if OLD.exists() or OLD.is_symlink():
        aside = OLD.rename(OLD.with_name(OLD.name + f".aside-{os.getpid()}"))
    evil = tmp_path / "evil" / "ptfactory"
    (evil / "engines").mkdir(parents=True)
    mark = tmp_path / "imported-evil"
    (evil / "__init__.py").write_text("")
    (evil / "engines" / "__init__.py").write_text("")
    (evil / "engines" / "worker.py").write_text(f"open({str(mark)!r}, 'w').write('pwned')\n")
    OLD.mkdir()
    (OLD / "ptfactory").symlink_to(evil, target_is_directory=True)
    try:
        yield mark
    finally:
        shutil.rmtree(OLD, ignore_errors=True)
        if aside is not None:
            aside.rename(OLD)


def test_an_installed_package_runs_its_worker_from_a_private_folder(
    planted: Path, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ptfactory as a wheel installs it: a folder in site-packages (here a link to this checkout's)
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "ptfactory").symlink_to(Path(ptfactory.__file__).parent, target_is_directory=True)
    monkeypatch.setattr(ptfactory, "__file__", str(site / "ptfactory" / "__init__.py"))
    made: list[Path] = []
    real = worker._package_root

    def watched(package: Path) -> tuple[Path, Path | None]:
        root, private = real(package)
        made.append(root)
        return root, private

    monkeypatch.setattr(worker, "_package_root", watched)
    client = WorkerClient(sys.executable, "transformers", {"model_id": "t", "model_path": str(tiny_model)})
    try:
        (root,) = made
        assert root != OLD and root.parent == Path(tempfile.gettempdir())
        assert stat.S_IMODE(root.stat().st_mode) == 0o700  # no one else may write into it
        assert (
            os.listdir(root) == ["ptfactory"]
            and (root / "ptfactory").resolve() == site.joinpath("ptfactory").resolve()
        )
        scored = client.call(
            "score", prompts=[[{"role": "user", "content": "hi"}]], continuations=["the fox"]
        )
        assert scored[0]["tokens"]  # the worker ran this package's engine
    finally:
        client.close()
    assert not planted.exists()  # the planted package was never imported
    assert not root.exists()  # the private folder goes with the worker
