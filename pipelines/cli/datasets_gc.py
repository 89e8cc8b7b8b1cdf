"""``ptf datasets gc``: remove what dead publishers left behind (see ``storage.gc``)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ptfactory.pipelines.cli._app import JsonOpt, datasets, datasets_app, out, print_json


@datasets_app.command("gc")
def datasets_gc(
    grace: Annotated[
        str,
        typer.Option(
            "--grace",
            help="leave anything younger than this (0, 90s, 15m, 1h, 2d): longer than any publish takes",
        ),
    ] = "1h",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would go, remove nothing")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove abandoned staging prefixes and claimed-but-uncommitted version folders.

    A publisher killed mid-publish leaves them; no reader ever sees them (a version is visible
    only once its manifest exists) and committed versions are never touched. An abandoned
    version number is never reused.

    Example: `ptf datasets gc --grace 1h --dry-run`
    """
    from ptfactory.storage.gc import collect_garbage, parse_grace

    found = collect_garbage(datasets(), parse_grace(grace), dry_run=dry_run)
    if as_json:
        print_json([f.to_json() for f in found])
        return
    verb = "would remove" if dry_run else "removed"
    if not found:
        out.print(f"nothing to collect (grace {grace})")
        return
    table = Table("dataset", "kind", "path", "files", "age (s)", "claimed by")
    for f in found:
        table.add_row(f.dataset, f.kind, f.path, str(f.files), f"{f.age_s:g}", f.owner)
    out.print(table)
    out.print(f"{verb} {len(found)} leftover(s), {sum(f.files for f in found)} file(s)")
