"""``ptf pull`` and ``ptf lineage``: a pinned version out, a sample's story back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ptfactory.pipelines.cli._app import app, datasets, out, print_json, user_path


@app.command()
def pull(
    ref: Annotated[str, typer.Argument(metavar="NAME@VERSION", help="vN, latest or an alias")],
    to: Annotated[Path, typer.Option("--to", help="an empty folder to copy the version into")],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="replace an earlier pull in --to, whole: the version is staged beside it and swapped in, "
            "so a failed or killed pull leaves the earlier one untouched",
        ),
    ] = False,
    columns: Annotated[
        str | None,
        typer.Option("--columns", help="comma-separated columns to keep, e.g. messages (projected shards)"),
    ] = None,
) -> None:
    """Copy a version into DIR, verifying every shard's sha256 (non-zero exit naming a bad file).

    DIR ends holding exactly the version's shards, README.md, manifest.json and ptf_pull.json (the
    receipt: version, manifest sha256, columns, each file's sha256). A non-empty DIR is refused
    unless --force. The version is pulled into a staging folder beside DIR and swapped in at
    once: DIR never holds part of one version and part of another.

    Example: `ptf pull sft@v3 --to data/sft-v3 --columns messages`
    """
    from ptfactory.storage.pull import RECEIPT_FILE
    from ptfactory.storage.pull import pull as pull_version

    destination = user_path(to)
    wanted = [c.strip() for c in columns.split(",") if c.strip()] if columns is not None else None
    receipt = pull_version(datasets(), ref, destination, force=force, columns=wanted)
    manifest = receipt.manifest
    total = sum(s.bytes for s in receipt.files)
    kept = f", columns {','.join(wanted)}" if wanted else ""
    out.print(
        f"{manifest.ref}: {len(receipt.files)} shard(s), {manifest.rows} rows, {total} bytes{kept} "
        f"verified -> {destination} (receipt {RECEIPT_FILE})"
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
