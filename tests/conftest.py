"""Shared fixtures: an isolated PTF_HOME, a throwaway project for CLI runs, and sample tables."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from ptfactory.storage.schema import from_records, sample_id

REPO = Path(__file__).resolve().parent.parent
PTF = [sys.executable, "-m", "ptfactory"]
# The bundled models are converted once per machine, not once per test home (a minute or two each);
# subprocesses (`ptf` runs) inherit it.
os.environ.setdefault("PTF_MODELS_DIR", str(REPO / ".ptf" / "test-state" / "models"))
# The CLI's rich consoles fix their width at import when COLUMNS is set (xdist's workers inherit
# COLUMNS=80): unset, each in-process CLI run takes the COLUMNS the test gives it.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh PTF_HOME for library-level tests."""
    path = tmp_path / "ptf-home"
    monkeypatch.setenv("PTF_HOME", str(path))
    return path


def fast_factory_yaml(model: Path) -> str:
    """A factory.yaml for tests: the tiny model and a handful of generations, so a run takes seconds."""
    return (
        f"engines:\n  generator: {{backend: transformers, model: {model}, price_per_mtok: 0.5}}\n"
        "generation:\n  self_instruct: {count: 2}\n  evol_instruct: {count: 1}\n  code: {count: 1}\n"
        "  instructions: {max_tokens: 12}\n  code_problems: {max_tokens: 12}\n"
        "  responses: {n: 1, max_tokens: 8}\n"
        # the tiny model's answers are noise: keep every row, so tests see rows flow through; the
        # sandbox and the tiny model judge (the embedding judge has its own tests)
        "difficulty: {k: 2, max_tokens: 16, ifd_max: 1000}\n"
        f"judges:\n  - {{name: execution, type: execution}}\n"
        f"  - {{name: tiny, type: llm, engine: {{model: {model}}}, max_tokens: 8}}\n"
        "routing: {accept_at: 1, max_spread: 9, reject_at: 1, silent: accept, audit_rate: 0}\n"
        # the judge probe check has its own test (tests/assets/test_panel_probe_check.py)
        "judging: {probe: false}\n"
    )


@pytest.fixture
def project(tmp_path: Path, tiny_model: Path) -> Path:
    """A project folder like a user's: the repo's dagster.yaml, a fast factory.yaml, nothing else."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(REPO / "dagster.yaml", root / "dagster.yaml")
    (root / "factory.yaml").write_text(fast_factory_yaml(tiny_model))
    return root


@pytest.fixture
def ptf(project: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the real `ptf` CLI in ``project`` (a subprocess, as a user would)."""

    def run(
        *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        full_env = {k: v for k, v in os.environ.items() if k not in ("PTF_HOME", "DAGSTER_HOME")}
        full_env.update({"COLUMNS": "200", "NO_COLOR": "1", **(env or {})})
        return subprocess.run(
            [*PTF, *args],
            cwd=cwd or project,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return run


def make_rows(count: int, batch: str = "b1", kind: str = "sft", start: int = 0) -> pa.Table:
    records = []
    for i in range(start, start + count):
        messages = [
            {"role": "user", "content": f"Question number {i}: what is {i} + {i}?"},
            {"role": "assistant", "content": f"The answer is {2 * i}."},
        ]
        records.append(
            {
                "sample_id": sample_id(kind, messages),
                "batch": batch,
                "kind": kind,
                "messages": messages,
                "provenance": {"method": "test", "seed_task_id": f"t{i}"},
                "decisions": [{"stage": "seed", "verdict": "keep", "reason": "test", "detail": None}],
            }
        )
    return from_records(records)


@pytest.fixture
def rows() -> Callable[..., pa.Table]:
    return make_rows


@pytest.fixture
def seeds_file(tmp_path: Path) -> Path:
    path = tmp_path / "seeds.jsonl"
    path.write_text(
        '{"id": "s1", "instruction": "Say hi.", "response": "Hi!"}\n'
        '{"id": "s2", "instruction": "Count to three.", "response": "1, 2, 3"}\n'
        '{"id": "s3", "instruction": "Name a color."}\n',
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The bundled SmolLM2-135M-Instruct as an HF folder (converted once, kept in .ptf/test-state)."""
    from tests.models import bundled_model

    return bundled_model()


@pytest.hookimpl(optionalhook=True)  # xdist's hook: `-p no:xdist` still runs the suite
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`-n N --dist loadfile`: a file per worker, a session service's files together, long files
    first (tests/parallel.py)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.parallel import UnitScheduling

    return UnitScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: what it collects, the controller hands out
        from tests.parallel import check_services, order_longest_first

        check_services(items)
        order_longest_first(items)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if hasattr(item.config, "workerinput"):
        from tests.parallel import fail_unlisted

        fail_unlisted(item)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Seconds per test folder (set-up, call and tear-down summed), so a change's cost to
    `make test` can be read off one run."""
    seconds: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                folder = "/".join(report.nodeid.split("::")[0].split("/")[:2])
                seconds[folder] = seconds.get(folder, 0.0) + report.duration
    if seconds:
        terminalreporter.write_sep("=", "seconds per test folder")
        for folder, total in sorted(seconds.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{total:8.1f} s  {folder}")
