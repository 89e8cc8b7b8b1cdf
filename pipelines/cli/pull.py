"""``ptf pull`` and ``ptf lineage``: a pinned version out, a sample's story back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ptfactory.pipelines.cli._app import app, datasets, out, print_json, user_path


@app.command()
def pull(
    ref: Annotated[str, typer.Argument(metavar="NAME@VERSION", help="vN, latest or an alias")],
    to: Annotated[Path, typer.Option("--to", help="directory to copy the version into")],
) -> None:
    """Copy a version into DIR, verifying every shard's sha256 (non-zero exit naming a bad file).

    Example: `ptf pull sft@v3 --to data/sft-v3`
    """
    from ptfactory.storage.pull import pull as pull_version

    destination = user_path(to)
    manifest = pull_version(datasets(), ref, destination)
    total = sum(s.bytes for s in manifest.shards)
    out.print(
        f"{manifest.ref}: {len(manifest.shards)} shard(s), {manifest.rows} rows, {total} bytes "
        f"verified -> {destination}"
    )


@app.command()
def lineage(
    sample_id: Annotated[
        str, typer.Argument(metavar="SAMPLE_ID", help="a sample id (or a unique prefix of one)")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Where a sample is (every version/shard/row) and why: its decisions trail through every stage.

    Example: `ptf lineage 3f9a2c --json`
    """
    from ptfactory.pipelines.lineage_view import render_lineage
    from ptfactory.storage.assetstore import AssetStore
    from ptfactory.storage.lineage import lineage as find_lineage

    story = find_lineage(sample_id, datasets(), AssetStore())
    if as_json:
        print_json(story)
    else:
        render_lineage(story, out)
