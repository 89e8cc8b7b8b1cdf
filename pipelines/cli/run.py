"""``ptf run``: add seeds as a batch and materialize the whole graph for it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ptfactory.annotators.routing import ROUTES
from ptfactory.pipelines.cli._app import app, config_path, err, out, print_json, user_path


@app.command()
def run(
    seeds: Annotated[Path, typer.Option("--seeds", help="a .jsonl/.parquet seed file, or a folder of them")],
    config: Annotated[Path, typer.Option("--config", help="factory.yaml to use")] = Path("factory.yaml"),
    batch: Annotated[
        str | None, typer.Option(help="batch (partition) name; default: <seeds>-<content hash>")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the outcome as JSON")] = False,
) -> None:
    """Add SEEDS as a new batch and materialize the whole graph for it, in-process.

    The seeds are validated first: a bad file stops here (exit 2) with the file, line and
    field, and nothing is published. The run is recorded in the project's Dagster
    instance (see it with `ptf ui`). Rerunning the same seeds is idempotent.

    Example: `ptf run --seeds demo/seeds --config demo/factory.yaml`
    """
    from ptfactory.pipelines.runner import run_batch

    path = config_path(config)
    if config != Path("factory.yaml") and not path.exists():
        raise typer.BadParameter(f"config file {path} does not exist", param_hint="--config")
    outcome = run_batch(user_path(seeds), path, batch, console=err)
    if as_json:
        print_json(outcome.__dict__)
    if not outcome.success:
        err.print(f"[red]run {outcome.run_id} failed[/]: " + "; ".join(outcome.errors))
        for asset, meta in outcome.materializations.items():
            if meta.get("refused"):  # a blocking publish check: which check, which rows
                err.print(f"{asset}: {meta['refused']}", markup=False)
        raise typer.Exit(1)
    if not as_json:
        _print_summary(outcome)
        for asset, meta in outcome.materializations.items():
            if "version" in meta:
                state = "published" if meta.get("created") else "unchanged, still"
                out.print(
                    f"{asset}: {state} [bold]{meta['version']}[/] ({meta.get('dagster/row_count')} rows)"
                )
                out.print(f"  {meta.get('path')}")
        out.print(f"run {outcome.run_id} succeeded; see it with `ptf ui`")


def _print_summary(outcome: Any) -> None:
    from ptfactory.pipelines.summary import stage_lines

    table = Table("stage", "rows", "tokens", "est. cost $", "wall s", title=f"batch {outcome.batch}")
    lines = stage_lines(outcome.materializations, outcome.step_seconds)
    for line in lines:
        table.add_row(
            line.asset,
            "" if line.rows is None else str(line.rows),
            str(line.tokens) if line.tokens else "",
            f"{line.cost_usd:.6f}" if line.cost_usd else "",
            f"{line.seconds:.1f}" if line.seconds is not None else "",
        )
    table.add_row(
        "[bold]total[/]",
        "",
        str(sum(x.tokens for x in lines)),
        f"{sum(x.cost_usd for x in lines):.6f}",
        f"{outcome.wall_s:.1f}",
    )
    out.print(table)
    _print_judging(outcome.materializations)
    if outcome.drops:
        drops = Table("dropped at: reason", "rows")
        for reason, count in outcome.drops.items():
            drops.add_row(reason, str(count))
        out.print(drops)


def _print_judging(materializations: dict[str, dict[str, Any]]) -> None:
    """The panel's health (counted votes per judge, alpha, who was left out) and the routes taken."""
    judged = materializations.get("judged_samples")
    if judged:
        shares = {
            k.removeprefix("counted_share_"): v for k, v in judged.items() if k.startswith("counted_share_")
        }
        alpha = judged.get("krippendorff_alpha")
        table = Table("judge", "counted votes", title="judges")
        for name, share in shares.items():
            table.add_row(name, f"{share:.1%}")
        out.print(table)
        out.print(
            f"Krippendorff alpha {alpha:.3f}"
            if isinstance(alpha, int | float)
            else "Krippendorff alpha: n/a",
            f"; left out: {judged.get('judges_left_out', 'none')}; constant: {judged.get('judges_constant', 'none')}",
            sep="",
        )
        warning = judged.get("self_preference_warning")
        if warning and warning != "none":
            err.print(f"[yellow]warning[/]: {warning}")
    routed = materializations.get("routed_samples")
    if routed:
        routes = {k: v for k, v in routed.items() if k in ROUTES and isinstance(v, int)}
        if routes:
            out.print("routes: " + ", ".join(f"{k} {v}" for k, v in routes.items()))
