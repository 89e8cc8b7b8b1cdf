"""``ptf sandbox``: build the sandbox image, run one file in it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ptfactory.pipelines.cli._app import config_path, err, print_json, sandbox_app, user_path


@sandbox_app.command("build")
def sandbox_build(
    force: Annotated[bool, typer.Option(help="rebuild even if the recipe is unchanged")] = False,
) -> None:
    """Build the sandbox image (idempotent: labelled with a hash of its recipe; reused when present).

    Uses python:3.11-slim where a registry answers, else builds a Debian root file system with
    debootstrap and imports it.

    Example: `ptf sandbox build --force`
    """
    from ptfactory.filters.execution.docker_sandbox import docker_client
    from ptfactory.filters.execution.image import build_image

    tag = build_image(docker_client(), say=err.print, force=force)
    typer.echo(tag)


@sandbox_app.command("run")
def sandbox_run(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="a Python file to run in the sandbox")],
    timeout: Annotated[float, typer.Option(help="seconds before the job is killed", min=0.1)] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    config: Annotated[Path, typer.Option("--config", help="factory.yaml (sandbox limits)")] = Path(
        "factory.yaml"
    ),
) -> None:
    """Run FILE with python3 in the sandbox; exit 0 only if it passed.

    Example: `ptf sandbox run solution.py --timeout 5`
    """

    from ptfactory.config import load_config
    from ptfactory.filters.execution import open_sandbox

    path = user_path(file)
    if not path.is_file():
        raise typer.BadParameter(f"{path} is not a file", param_hint="FILE")
    settings = load_config(config_path(config)).sandbox
    limits = settings.model_copy(update={"timeout_s": timeout})
    with open_sandbox(limits, 1, settings.backend) as sandbox:
        result = sandbox.run({path.name: path.read_bytes()}, ["python3", path.name], limits)
    if as_json:
        print_json({**result.to_dict(), "backend": sandbox.backend})
    else:
        sys.stdout.write(result.stdout_tail)
        sys.stderr.write(result.stderr_tail)
        err.print(
            f"{result.status} (exit {result.exit_code}, {result.duration_ms:.0f} ms) {result.detail}".rstrip()
        )
    raise typer.Exit(0 if result.passed else 1)
