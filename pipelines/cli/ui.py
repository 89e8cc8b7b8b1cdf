"""``ptf ui`` and ``ptf doctor``: the Dagster UI, and what is installed and running."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.table import Table

from ptfactory.pipelines.cli._app import app, err, out, print_json


@app.command()
def ui(
    host: Annotated[str, typer.Option(help="interface to bind; loopback unless you mean it")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 3000,
) -> None:
    """The Dagster UI (dagster dev) for this project; one Ctrl-C or SIGTERM stops it all.

    No --config: whatever the UI (and its label sensor) runs acts on batches under the config each
    batch recorded when `ptf run --config F` started it; a run of no batch (curation, publish) under
    the newest batch's. $PTF_CONFIG (default factory.yaml) serves only where no batch recorded one.

    Example: `ptf ui --port 3000`
    """
    from ptfactory.pipelines.ui import serve_ui

    err.print(f"Dagster UI on http://{host}:{port} (instance {os.environ.get('DAGSTER_HOME')})")
    raise typer.Exit(serve_ui(host, port))


@app.command()
def doctor(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """What is installed and running: Dagster, Docker engine, Label Studio, models, GPU.

    Example: `ptf doctor --json`
    """
    from ptfactory.pipelines.doctor import run_checks

    checks = run_checks()
    if as_json:
        print_json([c.__dict__ for c in checks])
        return
    colors = {"ok": "green", "warn": "yellow", "off": "dim", "missing": "red"}
    table = Table("component", "status", "detail")
    for c in checks:
        table.add_row(c.component, f"[{colors.get(c.status, 'white')}]{c.status}[/]", c.detail)
    out.print(table)
