"""``ptf``: the factory's command line.

Run from anywhere inside a project (a folder with dagster.yaml or factory.yaml): the
CLI works from the project root, so the Dagster instance and ``.ptf/`` are the same
ones ``ptf ui`` shows. Exit codes: 0 ok, 1 failure, 2 bad input (fix the input).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ptfactory.errors import FactoryError
from ptfactory.home import project_root

__all__ = ["app", "main"]

app = typer.Typer(
    name="ptf",
    help="ptfactory: seeds in, versioned and traceable SFT / preference datasets out.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
datasets_app = typer.Typer(
    help="List, inspect, tag and reindex published dataset versions.", no_args_is_help=True
)
app.add_typer(datasets_app, name="datasets")
sandbox_app = typer.Typer(help="The code sandbox: build its image, run a file in it.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")
annotate_app = typer.Typer(
    help="Expert review in Label Studio: run the server, push review queues, pull labels.",
    no_args_is_help=True,
)
app.add_typer(annotate_app, name="annotate")

out = Console()
err = Console(stderr=True)
_CWD = Path.cwd()

_DEFAULT_INSTANCE_YAML = """\
storage:
  sqlite:
    base_dir: {base}/storage
local_artifact_storage:
  module: dagster._core.storage.root
  class: LocalArtifactStorage
  config:
    base_dir: {base}
compute_logs:
  module: dagster._core.storage.local_compute_log_manager
  class: LocalComputeLogManager
  config:
    base_dir: {base}/logs
telemetry:
  enabled: false
"""


def user_path(value: Path) -> Path:
    """Paths on the command line are relative to where the user typed them, not the project root."""
    return value if value.is_absolute() else (_CWD / value).resolve()


@app.callback()
def _enter_project() -> None:
    """Work from the project root with its Dagster instance."""
    home = os.environ.get("PTF_HOME")
    if home and "://" not in home and not Path(home).is_absolute():
        os.environ["PTF_HOME"] = str((_CWD / home).resolve())
    root = project_root(_CWD)
    os.chdir(root)
    if not os.environ.get("DAGSTER_HOME"):
        if (root / "dagster.yaml").is_file():
            os.environ["DAGSTER_HOME"] = str(root)
        else:
            instance = root / ".ptf" / "dagster"
            instance.mkdir(parents=True, exist_ok=True)
            config = instance / "dagster.yaml"
            if not config.exists():
                config.write_text(_DEFAULT_INSTANCE_YAML.format(base=instance))
            os.environ["DAGSTER_HOME"] = str(instance)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _datasets() -> Any:
    from storage.versions import DatasetStore

    return DatasetStore()


# ---- run ------------------------------------------------------------------------------------


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
    """
    from pipelines.runner import run_batch

    config_path = user_path(config) if config != Path("factory.yaml") else project_root() / "factory.yaml"
    if config != Path("factory.yaml") and not config_path.exists():
        raise typer.BadParameter(f"config file {config_path} does not exist", param_hint="--config")
    outcome = run_batch(user_path(seeds), config_path, batch, console=err)
    if as_json:
        _print_json(outcome.__dict__)
    if not outcome.success:
        err.print(f"[red]run {outcome.run_id} failed[/]: " + "; ".join(outcome.errors))
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
    from pipelines.summary import stage_lines

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
    if outcome.drops:
        drops = Table("dropped at: reason", "rows")
        for reason, count in outcome.drops.items():
            drops.add_row(reason, str(count))
        out.print(drops)


# ---- datasets -------------------------------------------------------------------------------


@datasets_app.command("list")
def datasets_list(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Every dataset and version, newest last, with rows, parent and aliases."""
    store = _datasets()
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
        _print_json(rows)
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
    ref: Annotated[str, typer.Argument(help="NAME@VERSION: vN, latest or an alias")],
    as_json: Annotated[bool, typer.Option("--json", help="print the manifest as JSON")] = False,
) -> None:
    """One version's manifest: rows, lineage to its parent, shards with sha256, stats."""
    store = _datasets()
    manifest = store.resolve(ref)
    aliases = sorted(a for a, v in store.aliases(manifest.name).items() if v == manifest.version)
    runs = store.catalog.query(
        "SELECT run_id, kind, model, output_dir, created_at FROM training_runs "
        "WHERE dataset = ? AND version = ? ORDER BY created_at",
        [manifest.name, manifest.version],
    )
    if as_json:
        body = json.loads(manifest.to_json())
        body["aliases"] = aliases
        body["training_runs"] = [
            dict(zip(["run_id", "kind", "model", "output_dir", "created_at"], r, strict=True)) for r in runs
        ]
        _print_json(body)
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
    stats = Table("stat", "value")
    for key, value in sorted(manifest.stats.items()):
        stats.add_row(key, json.dumps(value, ensure_ascii=False))
    out.print(stats)
    if runs:
        trained = Table("training run", "kind", "model", "output", "at")
        for r in runs:
            trained.add_row(*[str(x) for x in r])
        out.print(trained)


@datasets_app.command("tag")
def datasets_tag(
    ref: Annotated[str, typer.Argument(help="NAME@VERSION to point the alias at")],
    alias: Annotated[str, typer.Argument(help="alias name, e.g. stable; moving it back is a rollback")],
) -> None:
    """Point ALIAS at a version; NAME@ALIAS then resolves to it everywhere."""
    previous, manifest = _datasets().tag(ref, alias)
    moved = f" (was v{previous})" if previous is not None else ""
    out.print(f"{manifest.name}@{alias} -> v{manifest.version}{moved}")


@datasets_app.command("reindex")
def datasets_reindex(
    config: Annotated[Path, typer.Option("--config", help="factory.yaml (its dedup settings)")] = Path(
        "factory.yaml"
    ),
) -> None:
    """Rebuild the DuckDB catalog and the dedup index of published samples from the versions on disk."""
    from pipelines.config import load_config
    from pipelines.reindex import rebuild_dedup_index

    store = _datasets()
    count = store.reindex()
    out.print(f"catalog rebuilt from {count} version manifest(s)")
    settings = load_config(
        user_path(config) if config != Path("factory.yaml") else project_root() / "factory.yaml"
    )
    indexed = rebuild_dedup_index(store, settings)
    out.print(f"dedup index rebuilt: {indexed} published sample(s)")


# ---- pull, lineage --------------------------------------------------------------------------


@app.command()
def pull(
    ref: Annotated[str, typer.Argument(help="NAME@VERSION: vN, latest or an alias")],
    to: Annotated[Path, typer.Option("--to", help="directory to copy the version into")],
) -> None:
    """Copy a version into DIR, verifying every shard's sha256 (non-zero exit naming a bad file)."""
    from storage.pull import pull as pull_version

    destination = user_path(to)
    manifest = pull_version(_datasets(), ref, destination)
    total = sum(s.bytes for s in manifest.shards)
    out.print(
        f"{manifest.ref}: {len(manifest.shards)} shard(s), {manifest.rows} rows, {total} bytes "
        f"verified -> {destination}"
    )


@app.command()
def lineage(
    sample_id: Annotated[str, typer.Argument(help="a sample id (or a unique prefix of one)")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Where a sample is (every version/shard/row) and why: its decisions trail through every stage."""
    from pipelines.lineage_view import render_lineage
    from storage.assetstore import AssetStore
    from storage.lineage import lineage as find_lineage

    story = find_lineage(sample_id, _datasets(), AssetStore())
    if as_json:
        _print_json(story)
    else:
        render_lineage(story, out)


# ---- filters on files -----------------------------------------------------------------------


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
    """
    from rich.progress import Progress

    from filters.dedup import DedupConfig, dedup_parquet

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
    has an `entry_point` column); write the rows plus `exec_status`, `exec_exit_code`, `exec_duration_ms`."""
    from dataclasses import replace

    from filters.execution import open_sandbox, validate_parquet
    from pipelines.config import load_config

    settings = load_config(_config_path(config)).sandbox
    limits = replace(settings.limits(), timeout_s=timeout)
    with open_sandbox(limits, settings.workers, settings.backend) as sandbox:
        stats = validate_parquet(user_path(source), user_path(out), sandbox, limits)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(stats.statuses.items()))
    err.print(
        f"{stats.validations} validated ({counts}); {stats.per_second:.1f}/s in the {sandbox.backend} sandbox"
    )
    typer.echo(str(user_path(out)))


@sandbox_app.command("build")
def sandbox_build(
    force: Annotated[bool, typer.Option(help="rebuild even if the recipe is unchanged")] = False,
) -> None:
    """Build the sandbox image (idempotent: labelled with a hash of its recipe; reused when present).

    Uses python:3.11-slim where a registry answers, else builds a Debian root file system with
    debootstrap and imports it.
    """
    from filters.execution.docker_sandbox import docker_client
    from filters.execution.image import build_image

    tag = build_image(docker_client(), say=err.print, force=force)
    typer.echo(tag)


@sandbox_app.command("run")
def sandbox_run(
    file: Annotated[Path, typer.Argument(help="a Python file to run in the sandbox")],
    timeout: Annotated[float, typer.Option(help="seconds before the job is killed", min=0.1)] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    config: Annotated[Path, typer.Option("--config", help="factory.yaml (sandbox limits)")] = Path(
        "factory.yaml"
    ),
) -> None:
    """Run FILE with python3 in the sandbox; exit 0 only if it passed."""
    from dataclasses import replace

    from filters.execution import open_sandbox
    from pipelines.config import load_config

    path = user_path(file)
    if not path.is_file():
        raise typer.BadParameter(f"{path} is not a file", param_hint="FILE")
    settings = load_config(_config_path(config)).sandbox
    limits = replace(settings.limits(), timeout_s=timeout)
    with open_sandbox(limits, 1, settings.backend) as sandbox:
        result = sandbox.run({path.name: path.read_bytes()}, ["python3", path.name], limits)
    if as_json:
        _print_json({**result.to_dict(), "backend": sandbox.backend})
    else:
        sys.stdout.write(result.stdout_tail)
        sys.stderr.write(result.stderr_tail)
        err.print(
            f"{result.status} (exit {result.exit_code}, {result.duration_ms:.0f} ms) {result.detail}".rstrip()
        )
    raise typer.Exit(0 if result.passed else 1)


def _config_path(config: Path) -> Path:
    return user_path(config) if config != Path("factory.yaml") else project_root() / "factory.yaml"


# ---- annotate -------------------------------------------------------------------------------


def _label_studio(config: Path, port: int | None) -> Any:
    from annotators.labelstudio.server import LabelStudioServer
    from pipelines.config import load_config
    from ptfactory.home import local_state_dir

    section = load_config(_config_path(config)).annotation
    return LabelStudioServer(local_state_dir(), port=port or section.port)


_ConfigOpt = Annotated[Path, typer.Option("--config", help="factory.yaml to use")]
_PortOpt = Annotated[int | None, typer.Option("--port", help="port (default: annotation.port, 8080)")]


@annotate_app.command("up")
def annotate_up(
    config: _ConfigOpt = Path("factory.yaml"),
    port: _PortOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the status as JSON")] = False,
) -> None:
    """Start Label Studio on 127.0.0.1 (its own venv and data under .ptf/, made on first use) and
    wait until its API answers. Idempotent: a running one is reused.

    Login and API token: PTF_LS_USERNAME / PTF_LS_PASSWORD / PTF_LS_TOKEN, else generated once
    into .ptf/annotation/credentials.json (mode 0600).
    """
    server = _label_studio(config, port)
    server.up(say=lambda line: err.print(line, highlight=False))
    status = server.status()
    if as_json:
        _print_json(status)
        return
    creds = server.credentials()
    out.print(f"Label Studio {status['version']} at [bold]{status['url']}[/] (pid {status['pid']})")
    out.print(f"  login: {creds.username} / password in {server.credentials_file}")


@annotate_app.command("down")
def annotate_down(config: _ConfigOpt = Path("factory.yaml"), port: _PortOpt = None) -> None:
    """Stop the Label Studio that `ptf annotate up` started (and nothing else). Data is kept."""
    server = _label_studio(config, port)
    out.print("stopped" if server.down() else "not running (nothing ptf started)")


@annotate_app.command("status")
def annotate_status(
    config: _ConfigOpt = Path("factory.yaml"),
    port: _PortOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Is our Label Studio running and answering; where are its data, log and credentials."""
    status = _label_studio(config, port).status()
    if as_json:
        _print_json(status)
    else:
        table = Table("field", "value")
        for key, value in status.items():
            table.add_row(key, str(value))
        out.print(table)
    raise typer.Exit(0 if status["answering"] else 1)


@annotate_app.command("adduser")
def annotate_adduser(
    email: Annotated[str, typer.Argument(help="the annotator's email (their login)")],
    config: _ConfigOpt = Path("factory.yaml"),
    port: _PortOpt = None,
    password_env: Annotated[
        str | None, typer.Option(help="env var holding the password; default: generate one")
    ] = None,
) -> None:
    """Create (or update) a non-admin annotator account; its password and token go to the 0600
    credentials file."""
    if "@" not in email:
        raise typer.BadParameter(f"{email!r} is not an email address", param_hint="EMAIL")
    password = os.environ.get(password_env) if password_env else None
    if password_env and not password:
        raise typer.BadParameter(f"env var {password_env} is empty or unset", param_hint="--password-env")
    server = _label_studio(config, port)
    user = server.add_user(email, password)
    out.print(f"annotator {user['email']} ready; password and token in {server.credentials_file}")


@annotate_app.command("push")
def annotate_push(
    config: _ConfigOpt = Path("factory.yaml"),
    batch: Annotated[
        list[str] | None, typer.Option("--batch", help="batch to push (repeat); default: all")
    ] = None,
) -> None:
    """Push the rows routed to expert review into Label Studio (one project per kind, judges'
    votes as pre-annotations). Idempotent: rows already pushed are not pushed again."""
    from pipelines.annotate import push_batches

    outcome = push_batches(_config_path(config), batch or None)
    created = existing = 0
    for key, meta in outcome.metadata.items():
        created += int(meta.get("tasks_created", 0))
        existing += int(meta.get("already_pushed", 0))
        for queue, url in (meta.get("projects") or {}).items():
            out.print(f"{key}: {queue} queue at {url}")
    out.print(f"{created} tasks created, {existing} already in Label Studio")


@annotate_app.command("pull")
def annotate_pull(config: _ConfigOpt = Path("factory.yaml")) -> None:
    """Pull new and changed annotations now (the sensor does this every 30 s under `ptf ui`), fold
    them into curated_samples and republish the datasets."""
    from pipelines.annotate import pull_and_curate

    outcome = pull_and_curate(_config_path(config))
    pulled = outcome.pulled
    if pulled is not None:
        events = ", ".join(f"{n} {k}" for k, n in sorted(pulled.added.items())) or "no new events"
        out.print(f"read {pulled.tasks_read} touched tasks: {events}")
    for asset, meta in outcome.metadata.items():
        if "version" in meta:
            state = "published" if meta.get("created") else "unchanged, still"
            out.print(f"{asset}: {state} {meta['version']} ({meta.get('dagster/row_count')} rows)")


# ---- train ----------------------------------------------------------------------------------


@app.command()
def train(
    kind: Annotated[str, typer.Argument(help="sft or dpo", metavar="sft|dpo")],
    dataset: Annotated[
        str | None, typer.Option(help="NAME@VERSION to train on; default: sft@latest / preference@latest")
    ] = None,
    model: Annotated[
        str, typer.Option(help="a model folder, or 'bundled' (SmolLM2-135M-Instruct)")
    ] = "bundled",
    output: Annotated[Path | None, typer.Option(help="where the model and ptf_lineage.json go")] = None,
    max_steps: Annotated[int, typer.Option(help="optimizer steps")] = 20,
    learning_rate: Annotated[float, typer.Option(help="peak learning rate (linear decay)")] = 5e-5,
    batch_size: Annotated[int, typer.Option(help="examples per device per step")] = 4,
    grad_accum: Annotated[int, typer.Option(help="gradient accumulation steps")] = 1,
    max_length: Annotated[int, typer.Option(help="tokens per example (longer ones are truncated)")] = 1024,
    beta: Annotated[float, typer.Option(help="DPO: strength of the KL anchor to the reference model")] = 0.1,
    seed: Annotated[int, typer.Option(help="seed for shuffling and initialisation")] = 0,
    bf16: Annotated[bool, typer.Option("--bf16", help="train in bfloat16 (GPUs)")] = False,
    eval_loss: Annotated[
        bool, typer.Option("--eval-loss/--no-eval-loss", help="loss on train/validation before and after")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="print the lineage as JSON")] = False,
) -> None:
    """Train with TRL (SFTTrainer / DPOTrainer) on a pinned dataset version, sha256-verified first.

    Writes the model, tokenizer and ptf_lineage.json (dataset, version, manifest sha256, config,
    metrics) to --output and records the run in the catalog (`ptf datasets show NAME@VERSION`).
    On GPUs: --bf16, and `accelerate launch --config_file training/accelerate/ddp.yaml -m pipelines
    train ...` for several (see docs/training.md).
    """
    from training.config import TrainConfig
    from training.run import train as run_training

    if kind not in ("sft", "dpo"):
        raise typer.BadParameter(f"{kind!r} is not a kind of training; use sft or dpo", param_hint="KIND")
    if output is None:
        raise typer.BadParameter("where should the model go? pass --output DIR", param_hint="--output")
    config = TrainConfig(
        kind=kind,  # type: ignore[arg-type]
        dataset=dataset or ("sft@latest" if kind == "sft" else "preference@latest"),
        model=model,
        output=str(user_path(output)),
        max_steps=max_steps,
        learning_rate=learning_rate,
        batch_size=batch_size,
        grad_accum=grad_accum,
        max_length=max_length,
        beta=beta,
        seed=seed,
        bf16=bf16,
        eval_loss=eval_loss,
    )
    result = run_training(config, say=lambda line: err.print(line, highlight=False))
    if as_json:
        _print_json(result.lineage)
        return
    m = result.metrics
    loss = (
        f"train loss {m['train_loss_before']:.4f} -> {m['train_loss_after']:.4f}"
        if "train_loss_before" in m and "train_loss_after" in m
        else f"mean train loss {m['train_loss_mean']:.4f}"
    )
    out.print(
        f"{config.kind}: {m['steps']} steps in {m['train_runtime_s']:.1f} s ({m['steps_per_s']:.2f} steps/s); {loss}"
    )
    out.print(f"  model and ptf_lineage.json in {result.output}")


# ---- ui, doctor -----------------------------------------------------------------------------


@app.command()
def ui(
    host: Annotated[str, typer.Option(help="interface to bind; loopback unless you mean it")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 3000,
) -> None:
    """The Dagster UI (dagster dev) for this project; one Ctrl-C or SIGTERM stops it all."""
    from pipelines.ui import serve_ui

    err.print(f"Dagster UI on http://{host}:{port} (instance {os.environ.get('DAGSTER_HOME')})")
    raise typer.Exit(serve_ui(host, port))


@app.command()
def doctor(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """What is installed and running: Dagster, Docker engine, Label Studio, models, GPU."""
    from pipelines.doctor import run_checks

    checks = run_checks()
    if as_json:
        _print_json([c.__dict__ for c in checks])
        return
    colors = {"ok": "green", "warn": "yellow", "off": "dim", "missing": "red"}
    table = Table("component", "status", "detail")
    for c in checks:
        table.add_row(c.component, f"[{colors.get(c.status, 'white')}]{c.status}[/]", c.detail)
    out.print(table)


def main() -> None:
    """Console entry point: FactoryErrors become one red line and their exit code, not a traceback."""
    try:
        code = app(standalone_mode=False)
    except FactoryError as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:  # click usage errors: print the usage and exit 2 like click would
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    # click returns the code of a typer.Exit instead of raising it when not standalone
    sys.exit(code if isinstance(code, int) else 0)
