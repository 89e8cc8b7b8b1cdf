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
from rich.console import Console, ConsoleDimensions
from typer.core import TyperGroup

from ptfactory.errors import UserInputError
from ptfactory.home import find_project, project_root

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


class _ArgsSeenGroup(TyperGroup):
    """Keeps the command line in ``ctx.meta`` for the callback: click hands a group's callback no
    arguments, and whether we need a project depends on the command (and on ``--help``)."""

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click.Context
        ctx.meta["ptf/args"] = [*getattr(ctx, "_protected_args", []), *ctx.args]
        return super().invoke(ctx)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _reflow_help(self)  # typer builds the whole tree first: every help reflowed once


def _reflow(text: str) -> str:
    """A docstring's paragraphs as single lines, for the terminal to wrap: typer's rich help keeps
    the source's line breaks, so at 80 columns every line ended in a stub of a few words.
    Paragraphs that hold a list or indented lines keep their breaks."""
    out = []
    for paragraph in text.split("\n\n"):
        lines = paragraph.split("\n")
        kept = paragraph.startswith("\b") or any(
            line.startswith((" ", "\t")) or line.lstrip().startswith(("- ", "* ", "| ")) for line in lines
        )
        out.append(paragraph if kept else " ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def _reflow_help(command: Any) -> None:
    """``_reflow`` on a command's help and, for a group, on every command below it."""
    if command.help:
        command.help = _reflow(command.help)
    for sub in (getattr(command, "commands", None) or {}).values():
        _reflow_help(sub)


app = typer.Typer(
    name="ptf",
    cls=_ArgsSeenGroup,
    help="ptfactory: seeds in, versioned and traceable SFT / preference datasets out.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
datasets_app = typer.Typer(
    help="List, inspect, tag, diff and reindex published dataset versions; retract rows; import a table.",
    no_args_is_help=True,
)
app.add_typer(datasets_app, name="datasets")
sandbox_app = typer.Typer(help="The code sandbox: build its image, run a file in it.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")
annotate_app = typer.Typer(
    help="Expert review in Label Studio: run the server, push review queues, pull labels.",
    no_args_is_help=True,
)
app.add_typer(annotate_app, name="annotate")

LOG_WIDTH = 160


class _Console(Console):
    """Rich wraps text and cuts table cells at 80 columns when no terminal is attached (a log
    file, CI, a pipe): such output gets ``LOG_WIDTH`` instead. A terminal's width, or COLUMNS
    when set, still decides, read at each print as Rich does."""

    @property
    def size(self) -> ConsoleDimensions:
        dims = super().size
        if not self.is_terminal and not os.environ.get("COLUMNS") and dims.width == 80:
            return ConsoleDimensions(LOG_WIDTH, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self.width, self.height = new_size


out = _Console()
err = _Console(stderr=True)
CWD = Path.cwd()

ConfigOpt = Annotated[Path, typer.Option("--config", help="factory.yaml to use")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


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


# What runs outside a project: scaffolding one, filters over files, the sandbox, the doctor. The data
# commands also run anywhere once PTF_HOME says where the data is (a trainer pulling from a store);
# `ptf judge` once --config names the panel (or PTF_HOME says where models and the cache go).
_ANYWHERE = {"init", "dedup", "validate", "sandbox", "doctor", "seeds", "decontaminate", "eval"}
_WITH_HOME = {"datasets", "pull", "lineage", "train"}
_WITH_CONFIG = {"judge", "judge-probe"}


@app.callback()
def _enter_project(ctx: typer.Context) -> None:
    """Work from the project root, with the Dagster instance that belongs to its PTF_HOME."""
    home = os.environ.get("PTF_HOME")
    if home and "://" not in home and not Path(home).is_absolute():
        os.environ["PTF_HOME"] = str((CWD / home).resolve())
    command = ctx.invoked_subcommand or ""
    args = ctx.meta.get("ptf/args", [])[1:]
    if "--help" in args or (not args and command in ("datasets", "annotate")) or command == "init":
        return
    root = find_project(CWD)
    if root is None and command in _ANYWHERE:
        return
    if root is None:
        if command in _WITH_HOME | _WITH_CONFIG and os.environ.get("PTF_HOME"):
            return
        if command in _WITH_CONFIG and any(a == "--config" or a.startswith("--config=") for a in args):
            return
        raise UserInputError(
            f"{CWD} is not inside a ptfactory project (no factory.yaml or dagster.yaml here or above); "
            "create one with `ptf init DIR` and run ptf there"
            + (", or set PTF_HOME to the data's home" if command in _WITH_HOME else "")
            + (", or pass --config FILE" if command in _WITH_CONFIG else "")
        )
    os.chdir(root)
    if not os.environ.get("DAGSTER_HOME"):
        from ptfactory.pipelines.instance import instance_home

        os.environ["DAGSTER_HOME"] = str(instance_home(root))
