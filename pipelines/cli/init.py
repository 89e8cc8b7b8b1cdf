"""``ptf init``: scaffold a new project, the way ``dagster project scaffold`` does."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from ptfactory.errors import UserInputError
from ptfactory.pipelines.cli._app import app, out, user_path
from ptfactory.storage.fs import atomic_write_text

# `.ptf/` is the project's state (datasets, the Dagster instance, venvs): never commit it
_GITIGNORE = ".ptf/\n__pycache__/\n"


@app.command()
def init(
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", help="the new project's folder (made if missing)")
    ] = Path("."),
) -> None:
    """Scaffold a project in DIR: factory.yaml (every key commented), dagster.yaml, seeds/example.jsonl
    and a .gitignore for .ptf/. Refuses a folder that already holds a project; writes nothing then.

    Example: `ptf init my-factory && cd my-factory && ptf run --seeds seeds/example.jsonl`
    """
    target = user_path(directory)
    if target.exists() and not target.is_dir():
        raise UserInputError(f"{target} is a file, not a folder; pass a folder for the new project")
    existing = [name for name in ("factory.yaml", "dagster.yaml") if (target / name).exists()]
    if existing:
        raise UserInputError(f"{target} already holds a project ({existing[0]}); nothing was written")
    scaffold = resources.files("ptfactory.pipelines.scaffold")
    files = {
        "factory.yaml": scaffold.joinpath("factory.yaml").read_text(encoding="utf-8"),
        "dagster.yaml": scaffold.joinpath("dagster.yaml").read_text(encoding="utf-8"),
        "seeds/example.jsonl": scaffold.joinpath("example-seeds.jsonl").read_text(encoding="utf-8"),
    }
    if not (target / ".gitignore").exists():
        files[".gitignore"] = _GITIGNORE
    for name, text in files.items():
        atomic_write_text(target / name, text)
        out.print(f"  wrote {target / name}")
    out.print(f"project ready in {target}; next: cd {directory} && ptf run --seeds seeds/example.jsonl")
