"""``ptf annotate``: Label Studio up/down/status, annotators, push review queues, pull labels."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ptfactory.pipelines.cli._app import ConfigOpt, annotate_app, config_path, err, out, print_json


def _label_studio(config: Path, port: int | None) -> Any:
    from ptfactory.annotators.labelstudio.server import LabelStudioServer
    from ptfactory.config import load_config
    from ptfactory.home import local_state_dir

    section = load_config(config_path(config)).annotation
    return LabelStudioServer(local_state_dir(), port=port or section.port)


_PortOpt = Annotated[int | None, typer.Option("--port", help="port (default: annotation.port, 8080)")]


@annotate_app.command("up")
def annotate_up(
    config: ConfigOpt = Path("factory.yaml"),
    port: _PortOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the status as JSON")] = False,
) -> None:
    """Start Label Studio on 127.0.0.1 (its own venv and data under .ptf/, made on first use) and
    wait until its API answers. Idempotent: a running one is reused.

    Login and API token: PTF_LS_USERNAME / PTF_LS_PASSWORD / PTF_LS_TOKEN, else generated once
    into .ptf/annotation/credentials.json (mode 0600).

    Example: `ptf annotate up --port 8080`
    """
    server = _label_studio(config, port)
    server.up(say=lambda line: err.print(line, highlight=False))
    status = server.status()
    if as_json:
        print_json(status)
        return
    creds = server.credentials()
    out.print(f"Label Studio {status['version']} at [bold]{status['url']}[/] (pid {status['pid']})")
    out.print(f"  login: {creds.username} / password in {server.credentials_file}")


@annotate_app.command("migrate")
def annotate_migrate(config: ConfigOpt = Path("factory.yaml"), port: _PortOpt = None) -> None:
    """Prepare Label Studio's database now, without starting it: install its venv if needed and
    apply its migrations (minutes, once), so that the next `ptf annotate up` is a warm start.
    `make demo`'s set-up runs it. Idempotent.

    Example: `ptf annotate migrate`
    """
    from ptfactory.annotators.labelstudio.migrate import migrate

    server = _label_studio(config, port)
    did = migrate(server, say=lambda line: err.print(line, highlight=False))
    out.print(f"Label Studio's database in {server.data_dir} is {'migrated' if did else 'already migrated'}")


@annotate_app.command("down")
def annotate_down(config: ConfigOpt = Path("factory.yaml"), port: _PortOpt = None) -> None:
    """Stop the Label Studio that `ptf annotate up` started (and nothing else). Data is kept.

    Example: `ptf annotate down`
    """
    server = _label_studio(config, port)
    out.print("stopped" if server.down() else "not running (nothing ptf started)")


@annotate_app.command("status")
def annotate_status(
    config: ConfigOpt = Path("factory.yaml"),
    port: _PortOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Is our Label Studio running and answering; where are its data, log and credentials.

    Example: `ptf annotate status --json`
    """
    status = _label_studio(config, port).status()
    if as_json:
        print_json(status)
    else:
        table = Table("field", "value")
        for key, value in status.items():
            table.add_row(key, str(value))
        out.print(table)
    raise typer.Exit(0 if status["answering"] else 1)


@annotate_app.command("adduser")
def annotate_adduser(
    email: Annotated[str, typer.Argument(metavar="EMAIL", help="the annotator's email (their login)")],
    config: ConfigOpt = Path("factory.yaml"),
    port: _PortOpt = None,
    password_env: Annotated[
        str | None, typer.Option(help="env var holding the password; default: generate one")
    ] = None,
) -> None:
    """Create (or update) a non-admin annotator account; its password and token go to the 0600
    credentials file.

    Example: `ptf annotate adduser ann@example.com --password-env ANN_PASSWORD`
    """
    if "@" not in email:
        raise typer.BadParameter(f"{email!r} is not an email address", param_hint="EMAIL")
    password = os.environ.get(password_env) if password_env else None
    if password_env and not password:
        raise typer.BadParameter(f"env var {password_env} is empty or unset", param_hint="--password-env")
    from ptfactory.annotators.labelstudio.accounts import add_user

    server = _label_studio(config, port)
    user = add_user(server, email, password)
    out.print(f"annotator {user['email']} ready; password and token in {server.credentials_file}")


@annotate_app.command("push")
def annotate_push(
    config: ConfigOpt = Path("factory.yaml"),
    batch: Annotated[
        list[str] | None,
        typer.Option(
            "--batch", help="push the rows this batch's review budget gave a slot (repeat); default: all"
        ),
    ] = None,
) -> None:
    """Push the review queue's rows that hold a review slot into Label Studio (one project per
    kind, judges' votes as pre-annotations, the corrected-response box starting from the response;
    blind audit rows to the kind's audit project, without votes), each where its batch's recorded
    config says (--config serves only batches that recorded none). Rows over a batch's review
    budget wait in the queue: a later batch's routing gives them a slot within its budget, and
    pushing then sends them. Idempotent: rows already pushed are not pushed again.

    Example: `ptf annotate push --batch demo-1a2b3c`
    """
    from ptfactory.pipelines.annotate import push_batches

    outcome = push_batches(config_path(config), batch or None)
    for skipped, why in outcome.skipped.items():
        err.print(f"skipped batch {skipped}: {why} (run it with this PTF_HOME, or push from its home)")
    meta = outcome.metadata.get("review_queue", {})
    for title, url in (meta.get("projects") or {}).items():
        out.print(f"{title} queue at {url}")
    out.print(
        f"{int(meta.get('tasks_created', 0))} tasks created, {int(meta.get('already_pushed', 0))} already in Label Studio"
    )
    earlier, audit = int(meta.get("from_earlier_batches", 0)), int(meta.get("audit_tasks", 0))
    if earlier or audit:
        out.print(
            f"  {earlier} rows had waited in an earlier batch for a review slot; {audit} new audit tasks"
        )
    waiting = int(meta.get("waiting_for_a_slot", 0))
    if waiting:
        out.print(
            f"{waiting} rows wait in the review queue for a slot (over their batch's routing.review_budget): "
            "the next batches' routing gives them slots, and routing.silent after routing.max_wait_batches"
        )


@annotate_app.command("pull")
def annotate_pull(config: ConfigOpt = Path("factory.yaml")) -> None:
    """Pull new and changed annotations now (the sensor does this every 30 s under `ptf ui`), fold
    them into curated_samples and republish the datasets, under the config the newest batch
    recorded (--config serves only where no batch recorded one).

    Example: `ptf annotate pull`
    """
    from ptfactory.pipelines.annotate import pull_and_curate

    outcome = pull_and_curate(config_path(config))
    pulled = outcome.pulled
    if pulled is not None:
        events = ", ".join(f"{n} {k}" for k, n in sorted(pulled.added.items())) or "no new events"
        out.print(f"read {pulled.tasks_read} touched tasks: {events}")
    for asset, meta in outcome.metadata.items():
        if "version" in meta:
            state = "published" if meta.get("created") else "unchanged, still"
            out.print(f"{asset}: {state} {meta['version']} ({meta.get('dagster/row_count')} rows)")
