"""``ptf dedup`` and ``ptf validate``: one filter over a Parquet file, outside any batch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ptfactory.pipelines.cli._app import app, config_path, err, user_path


@app.command()
def dedup(
    source: Annotated[Path, typer.Argument(metavar="IN.parquet", help="input Parquet file")],
    text_column: Annotated[str, typer.Option("--text-column", help="the text column to compare")],
    threshold: Annotated[
        float, typer.Option(help="Jaccard of word n-gram sets that makes a duplicate", min=0.01, max=1.0)
    ],
    out: Annotated[Path, typer.Option("--out", help="output Parquet file (written atomically)")],
    num_perm: Annotated[
        int, typer.Option("--num-perm", help="MinHash signature length", min=16, max=1024)
    ] = 128,
    ngram: Annotated[int, typer.Option("--ngram", help="words per shingle", min=1, max=20)] = 5,
) -> None:
    """Cluster near-duplicate rows of IN.parquet (MinHash LSH, verified, union-find).

    Writes every input row plus `dedup_cluster` (the row index of the cluster's kept row),
    `dedup_representative` (true for the kept row) and `dedup_jaccard` (to the kept row).

    Example: `ptf dedup rows.parquet --text-column text --threshold 0.8 --out deduped.parquet`
    """
    from rich.progress import Progress

    from ptfactory.filters.dedup import DedupConfig, dedup_parquet

    config = DedupConfig(threshold=threshold, num_perm=num_perm, ngram=ngram)
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("hashing", total=None)
        result = dedup_parquet(
            user_path(source),
            user_path(out),
            text_column,
            config,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
        )
    stats = result.stats
    reasons = {r: result.reason.count(r) for r in ("exact_duplicate", "near_duplicate")}
    rate = stats["rows_in"] / result.seconds if result.seconds else 0.0
    err.print(
        f"{stats['rows_in']} rows -> {stats['rows_out']} kept; {stats['clusters']} clusters (largest "
        f"{stats['largest_cluster']}); dropped: {reasons}; {rate:,.0f} docs/s clustering"
    )
    typer.echo(str(user_path(out)))


@app.command()
def validate(
    source: Annotated[
        Path, typer.Argument(metavar="IN.parquet", help="Parquet with `solution` and `tests` columns")
    ],
    out: Annotated[Path, typer.Option("--out", help="output Parquet file (written atomically)")],
    timeout: Annotated[float, typer.Option(help="seconds per job", min=0.1)] = 10.0,
    config: Annotated[Path, typer.Option("--config", help="factory.yaml (sandbox limits)")] = Path(
        "factory.yaml"
    ),
) -> None:
    """Run every row's `solution` then `tests` in the sandbox (plus `check(entry_point)` when the file
    has an `entry_point` column); write the rows plus `exec_status`, `exec_exit_code`, `exec_duration_ms`.

    Example: `ptf validate solutions.parquet --out validated.parquet --timeout 5`
    """

    from ptfactory.config import load_config
    from ptfactory.filters.execution import open_sandbox, validate_parquet

    settings = load_config(config_path(config)).sandbox
    limits = settings.model_copy(update={"timeout_s": timeout})
    with open_sandbox(limits, settings.workers, settings.backend) as sandbox:
        stats = validate_parquet(user_path(source), user_path(out), sandbox, limits)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(stats.statuses.items()))
    err.print(
        f"{stats.validations} validated ({counts}); {stats.per_second:.1f}/s in the {sandbox.backend} sandbox"
    )
    typer.echo(str(user_path(out)))
