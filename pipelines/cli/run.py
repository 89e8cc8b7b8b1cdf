"""``ptf run``: add seeds as a batch and materialize the whole graph for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ptfactory.annotators.routing import ROUTES
from ptfactory.errors import UserInputError
from ptfactory.pipelines.cli._app import app, config_path, err, out, print_json, user_path
from ptfactory.storage.seedstore import BATCH_RULE, check_batch_name


def _batch_option(value: str | None) -> str | None:
    """``--batch``, checked while the options are read (so ``--dry-run`` refuses a bad name too)."""
    if value is None:
        return None
    try:
        return check_batch_name(value)
    except UserInputError as exc:
        raise typer.BadParameter(str(exc)) from exc


@app.command()
def run(
    seeds: Annotated[Path, typer.Option("--seeds", help="a .jsonl/.parquet seed file, or a folder of them")],
    config: Annotated[Path, typer.Option("--config", help="factory.yaml to use")] = Path("factory.yaml"),
    batch: Annotated[
        str | None,
        typer.Option(
            callback=_batch_option,
            help=f"batch (partition) name: {BATCH_RULE}; default: <seeds>-<content hash>. A name "
            "already run with other seeds is refused (exit 2); the same seeds again resume it",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the outcome as JSON")] = False,
    budget: Annotated[
        list[str] | None,
        typer.Option(
            "--budget",
            metavar="KEY=VALUE[,KEY=VALUE]",
            help="limits for this run over factory.yaml's `budget`: tokens=N (prompt + completion "
            "tokens the engines send; cache hits are free), usd=X (at each engine's price_per_mtok), "
            "batch_tokens=N / batch_usd=X (the batch over all its runs), publish_partial=true|false; "
            "comma-separated or repeated, e.g. --budget tokens=200000 --budget usd=0.5",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="print the requests, tokens and dollars each stage would spend (upper bounds from "
            "the config and the seeds) and exit 0: nothing runs, no model loads",
        ),
    ] = False,
) -> None:
    """Add SEEDS as a new batch and materialize the whole graph for it, in-process.

    The seeds are validated first: a bad file stops here (exit 2) with the file, line and
    field, and nothing is published. The run is recorded in the project's Dagster
    instance (see it with `ptf ui`). Rerunning the same seeds is idempotent.

    With a budget (factory.yaml `budget`, or --budget), the engines stop sending once the run
    reaches it: rows left unfinished are dropped as `budget_exhausted`, nothing of the batch is
    published unless publish_partial is true, and ptf exits 3. A rerun with a larger budget
    sends none of the requests that finished (they come from the cache) and finishes the batch.

    Example: `ptf run --seeds demo/seeds --config demo/factory.yaml`; also
    `ptf run --seeds demo/seeds --dry-run`; `ptf run --seeds demo/seeds --budget usd=0.5`
    """
    from ptfactory.engines.budget import parse_budget_option

    path = config_path(config)
    if config != Path("factory.yaml") and not path.exists():
        raise typer.BadParameter(f"config file {path} does not exist", param_hint="--config")
    limits = parse_budget_option(budget or [])
    if dry_run:
        _dry_run(user_path(seeds), path, limits, as_json, batch)
        return
    from ptfactory.pipelines.runner import run_batch

    outcome = run_batch(user_path(seeds), path, batch, console=err, budget=limits)
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
    if outcome.budget_stops:
        where = "; ".join(f"{asset}: {reason}" for asset, reason in outcome.budget_stops)
        err.print(
            f"[yellow]run {outcome.run_id} stopped at its budget[/] ({where}): "
            f"{outcome.budget_exhausted_rows} rows budget_exhausted"
            + ("" if outcome.publish_partial else ", nothing of the batch published")
            + "; rerun with a larger --budget to finish (finished requests come from the cache)",
            markup=True,
        )
        raise typer.Exit(3)
    if not as_json:
        out.print(f"run {outcome.run_id} succeeded; see it with `ptf ui`")


def _dry_run(seeds: Path, config: Path, limits: dict[str, Any], as_json: bool, batch: str | None) -> None:
    """What a run of SEEDS would spend, per stage: from the config and the seeds, nothing else."""
    from ptfactory.config import load_config
    from ptfactory.engines.budget import effective_budget
    from ptfactory.generators.seeds import read_seeds, seed_files
    from ptfactory.home import ptf_home
    from ptfactory.pipelines.estimate import estimate_run, over_budget
    from ptfactory.storage.seedstore import SeedStore

    settings = load_config(config)
    tasks = read_seeds(seeds, settings.seeds.max_field_chars)
    if batch is not None:  # the run would refuse a name already run with other seeds: so does this
        SeedStore(ptf_home()).check(seed_files(seeds), batch)
    lines = estimate_run(settings, tasks, config.parent)
    budget = effective_budget(settings.budget, json.dumps(limits) if limits else None).limits()
    verdict = over_budget(lines, budget)
    total = {
        "requests": sum(x.requests for x in lines),
        "prompt_tokens": sum(x.prompt_tokens for x in lines),
        "completion_tokens": sum(x.completion_tokens for x in lines),
        "tokens": sum(x.tokens for x in lines),
        "usd": round(sum(x.usd for x in lines), 6),
    }
    if as_json:
        print_json(
            {
                "seeds": len(tasks),
                "stages": [x.to_dict() for x in lines],
                "total": total,
                "budget": budget,
                "over_budget": verdict,
            }
        )
        return
    table = Table(
        "stage",
        "part",
        "engine",
        "requests",
        "prompt tok",
        "completion tok",
        "est. $",
        title="dry run: upper bounds for a first run (a rerun's cache hits are free)",
    )
    for x in lines:
        table.add_row(
            x.stage,
            x.part,
            x.engine,
            f"{x.requests:,}",
            f"{x.prompt_tokens:,}",
            f"{x.completion_tokens:,}",
            f"{x.usd:.6f}",
        )
    table.add_row(
        "[bold]total[/]",
        "",
        "",
        f"{total['requests']:,}",
        f"{total['prompt_tokens']:,}",
        f"{total['completion_tokens']:,}",
        f"{total['usd']:.6f}",
    )
    out.print(f"{len(tasks)} seed tasks from {seeds}: nothing ran, no model loaded", soft_wrap=True)
    out.print(table)
    out.print(f"total tokens: {total['tokens']:,}; est. ${total['usd']:.6f}")
    if budget:
        shown = ", ".join(f"{k} {v:,.6g}" for k, v in budget.items())
        out.print(f"budget: {shown}: " + (verdict or "the estimate fits"))


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
        from ptfactory.pipelines.summary import judge_weight_lines, verifier_lines

        out.print("verifiers: " + ("; ".join(verifier_lines(judged)) or "none applied"), highlight=False)
        for line in judge_weight_lines(judged):  # each judge's weight on this batch, flagged under 0.55
            out.print(f"judge {line}", highlight=False, soft_wrap=True, markup=False)
        warning = judged.get("self_preference_warning")
        if warning and warning != "none":
            err.print(f"[yellow]warning[/]: {warning}")
    routed = materializations.get("routed_samples")
    if routed:
        routes = {k: v for k, v in routed.items() if k in ROUTES and isinstance(v, int)}
        if routes:
            out.print("routes: " + ", ".join(f"{k} {v}" for k, v in routes.items()))
