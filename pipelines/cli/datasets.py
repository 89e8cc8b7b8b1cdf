"""``ptf datasets``: list, show, tag and reindex published versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ptfactory.pipelines.cli._app import config_path, datasets, datasets_app, out, print_json

if TYPE_CHECKING:
    from ptfactory.annotators.judges.calibration import Calibration


@datasets_app.command("list")
def datasets_list(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Every dataset and version, newest last, with rows, parent and aliases.

    Example: `ptf datasets list --json`
    """
    store = datasets()
    rows = []
    for name in store.names():
        aliases = store.aliases(name)
        for version in store.versions(name):
            manifest = store.manifest(name, version)
            rows.append(
                {
                    "dataset": name,
                    "version": f"v{version}",
                    "kind": manifest.kind,
                    "rows": manifest.rows,
                    "parent": f"v{manifest.parent}" if manifest.parent else None,
                    "added": manifest.rows_added,
                    "removed": manifest.rows_removed,
                    "aliases": sorted(a for a, v in aliases.items() if v == version),
                    "created_at": manifest.created_at,
                    "path": store.version_dir(name, version),
                }
            )
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no datasets published yet; run `ptf run --seeds PATH`")
        return
    table = Table("dataset", "version", "kind", "rows", "parent", "+/-", "aliases", "created")
    for r in rows:
        table.add_row(
            r["dataset"],
            r["version"],
            r["kind"],
            str(r["rows"]),
            r["parent"] or "",
            f"+{r['added']}/-{r['removed']}",
            ", ".join(r["aliases"]),
            r["created_at"],
        )
    out.print(table)


@datasets_app.command("show")
def datasets_show(
    ref: Annotated[str, typer.Argument(metavar="NAME@VERSION", help="vN, latest or an alias")],
    as_json: Annotated[bool, typer.Option("--json", help="print the manifest as JSON")] = False,
) -> None:
    """One version's manifest: rows, lineage to its parent, shards with sha256, stats.

    Example: `ptf datasets show sft@latest`
    """
    store = datasets()
    manifest = store.resolve(ref)
    aliases = sorted(a for a, v in store.aliases(manifest.name).items() if v == manifest.version)
    runs = store.catalog.query(
        "SELECT run_id, kind, model, output_dir, created_at FROM training_runs "
        "WHERE dataset = ? AND version = ? ORDER BY created_at",
        [manifest.name, manifest.version],
    )
    from ptfactory.storage.lineage import evaluations_of  # not at `ptf` start-up

    evals = evaluations_of(store, manifest.name, manifest.version)
    if as_json:
        body = json.loads(manifest.to_json())
        body["aliases"] = aliases
        body["training_runs"] = [
            dict(zip(["run_id", "kind", "model", "output_dir", "created_at"], r, strict=True)) for r in runs
        ]
        body["evaluations"] = evals
        print_json(body)
        return
    out.print(f"[bold]{manifest.ref}[/] ({manifest.kind}) {', '.join(aliases)}")
    out.print(f"  path         {store.version_dir(manifest.name, manifest.version)}")
    parent = f"v{manifest.parent}" if manifest.parent else "none"
    out.print(
        f"  rows         {manifest.rows} (parent {parent}: +{manifest.rows_added} / -{manifest.rows_removed})"
    )
    out.print(f"  batches      {', '.join(manifest.batches)}")
    out.print(f"  created      {manifest.created_at} by run {manifest.dagster_run_id}")
    out.print(f"  code/config  {manifest.code_version} / {manifest.config_hash}")
    shards = Table("shard", "rows", "bytes", "sha256")
    for s in manifest.shards:
        shards.add_row(s.file, str(s.rows), str(s.bytes), s.sha256)
    out.print(shards)
    from ptfactory.annotators.judges.calibration import STATS_KEY, Calibration  # not at `ptf` start-up

    stats = Table("stat", "value")
    for key, value in sorted(manifest.stats.items()):
        if key != STATS_KEY:
            stats.add_row(key, json.dumps(value, ensure_ascii=False))
    out.print(stats)
    if isinstance(manifest.stats.get(STATS_KEY), dict):
        _print_calibration(Calibration.from_stats(manifest.stats[STATS_KEY]))
    if runs:
        trained = Table("training run", "kind", "model", "output", "at")
        for r in runs:
            trained.add_row(*[str(x) for x in r])
        out.print(trained)
    if evals:
        evaluated = Table(
            "evaluation", "checkpoint", "tasks", "success", "95% CI", "report", title="evaluations"
        )
        for e in evals:
            low, high = e["ci95"] or (0.0, 0.0)
            evaluated.add_row(
                e["run_id"][:12],
                str(e["checkpoint"]),
                ", ".join(e["tasks"]),
                f"{e['success_rate']:.3f}",
                f"[{low:.3f}, {high:.3f}]",
                str(e["report"]),
            )
        out.print(evaluated)


def _num(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "n/a"


def _print_calibration(calibration: Calibration) -> None:
    """The judges against the experts' labels, and the weights the panel applies from this version."""
    weighting = (
        "reliability weights"
        if calibration.weights is not None
        else f"equal weights until {calibration.min_labels} labels"
    )
    out.print(
        f"[bold]judge calibration[/]  {calibration.labels} expert labels, {weighting}; panel "
        f"(mean >= {calibration.accept_at:g}) accuracy {_num(calibration.panel_accuracy)}, "
        f"kappa {_num(calibration.panel_kappa)}",
        highlight=False,
    )
    audit = calibration.audit
    if audit is not None:
        out.print(
            f"  audit rows   {audit.rows}: panel accuracy {_num(audit.panel_accuracy)}, "
            f"kappa {_num(audit.panel_kappa)} (a random sample of the automatic verdicts: unbiased)",
            highlight=False,
        )
    table = Table("judge", "weight", "accuracy", "kappa", "votes", *(["audit accuracy"] if audit else []))
    for row in calibration.rows():
        cells = [_num(row["weight"]), _num(row["accuracy"]), _num(row["kappa"]), str(row["votes"])]
        if audit:
            cells.append(_num(audit.accuracy.get(row["judge"])))
        table.add_row(row["judge"], *cells)
    out.print(table)


@datasets_app.command("tag")
def datasets_tag(
    ref: Annotated[str, typer.Argument(metavar="NAME@VERSION", help="the version to point the alias at")],
    alias: Annotated[
        str, typer.Argument(metavar="ALIAS", help="alias name, e.g. stable; moving it back is a rollback")
    ],
) -> None:
    """Point ALIAS at a version; NAME@ALIAS then resolves to it everywhere.

    Example: `ptf datasets tag sft@v3 stable`
    """
    previous, manifest = datasets().tag(ref, alias)
    moved = f" (was v{previous})" if previous is not None else ""
    out.print(f"{manifest.name}@{alias} -> v{manifest.version}{moved}")


@datasets_app.command("reindex")
def datasets_reindex(
    config: Annotated[Path, typer.Option("--config", help="factory.yaml (its dedup settings)")] = Path(
        "factory.yaml"
    ),
) -> None:
    """Rebuild the DuckDB catalog and the dedup index of published samples from the versions on disk.

    Example: `ptf datasets reindex`
    """
    from ptfactory.config import load_config
    from ptfactory.pipelines.reindex import rebuild_dedup_index

    store = datasets()
    count = store.reindex()
    out.print(f"catalog rebuilt from {count} version manifest(s)")
    settings = load_config(config_path(config))
    indexed = rebuild_dedup_index(store, settings)
    out.print(f"dedup index rebuilt: {indexed} published sample(s)")
