"""The ``ptf`` app, its sub-command groups and what every command module shares.

Run from anywhere inside a project (a folder with dagster.yaml or factory.yaml): the
CLI works from the project root, so the Dagster instance and ``.ptf/`` are the same
ones ``ptf ui`` shows. Exit codes: 0 ok, 1 failure, 2 bad input (fix the input).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ptfactory.home import project_root

__all__ = [
    "CWD",
    "ConfigOpt",
    "JsonOpt",
    "annotate_app",
    "app",
    "config_path",
    "datasets",
    "datasets_app",
    "err",
    "out",
    "print_json",
    "sandbox_app",
    "user_path",
]

app = typer.Typer(
    name="ptf",
    help="ptfactory: seeds in, versioned and traceable SFT / preference datasets out.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
datasets_app = typer.Typer(
    help="List, inspect, tag and reindex published dataset versions.", no_args_is_help=True
)
app.add_typer(datasets_app, name="datasets")
sandbox_app = typer.Typer(help="The code sandbox: build its image, run a file in it.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")
annotate_app = typer.Typer(
    help="Expert review in Label Studio: run the server, push review queues, pull labels.",
    no_args_is_help=True,
)
app.add_typer(annotate_app, name="annotate")

out = Console()
err = Console(stderr=True)
CWD = Path.cwd()

ConfigOpt = Annotated[Path, typer.Option("--config", help="factory.yaml to use")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]

_DEFAULT_INSTANCE_YAML = """\
storage:
  sqlite:
    base_dir: {base}/storage
local_artifact_storage:
  module: dagster._core.storage.root
  class: LocalArtifactStorage
  config:
    base_dir: {base}
compute_logs:
  module: dagster._core.storage.local_compute_log_manager
  class: LocalComputeLogManager
  config:
    base_dir: {base}/logs
telemetry:
  enabled: false
"""


def user_path(value: Path) -> Path:
    """Paths on the command line are relative to where the user typed them, not the project root."""
    return value if value.is_absolute() else (CWD / value).resolve()


def config_path(config: Path) -> Path:
    """``--config``: the project's factory.yaml by default, else the user's path (relative to CWD)."""
    return user_path(config) if config != Path("factory.yaml") else project_root() / "factory.yaml"


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def datasets() -> Any:
    from ptfactory.storage.versions import DatasetStore

    return DatasetStore()


@app.callback()
def _enter_project() -> None:
    """Work from the project root with its Dagster instance."""
    home = os.environ.get("PTF_HOME")
    if home and "://" not in home and not Path(home).is_absolute():
        os.environ["PTF_HOME"] = str((CWD / home).resolve())
    root = project_root(CWD)
    os.chdir(root)
    if not os.environ.get("DAGSTER_HOME"):
        if (root / "dagster.yaml").is_file():
            os.environ["DAGSTER_HOME"] = str(root)
        else:
            instance = root / ".ptf" / "dagster"
            instance.mkdir(parents=True, exist_ok=True)
            config = instance / "dagster.yaml"
            if not config.exists():
                config.write_text(_DEFAULT_INSTANCE_YAML.format(base=instance))
            os.environ["DAGSTER_HOME"] = str(instance)
