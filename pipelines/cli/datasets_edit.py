"""``ptf datasets retract|diff|import``: take rows out, compare versions, bring your own data."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from ptfactory.errors import PublishError, UserInputError
from ptfactory.pipelines.cli._app import (
    ConfigOpt,
    JsonOpt,
    config_path,
    datasets,
    datasets_app,
    out,
    print_json,
    user_path,
)

_TRIES = 20  # times an import reads the retractions again after a version landed under it


def _split_rows(manifest: Any) -> str:
    counts = {
        split: sum(s.rows for s in manifest.shards if s.file in files)
        for split, files in manifest.splits.items()
    }
    return ", ".join(f"{split} {rows}" for split, rows in counts.items()) or f"{manifest.rows} rows"


@datasets_app.command("retract")
def datasets_retract(
    ref: Annotated[
        str,
        typer.Argument(metavar="NAME@VERSION", help="the latest version (vN or latest) to take rows out of"),
    ],
    batch: Annotated[
        list[str] | None, typer.Option("--batch", help="a batch to take out; repeat for several")
    ] = None,
    samples: Annotated[
        Path | None,
        typer.Option(
            "--samples",
            help="a file of sample ids to take out: one a line, or .parquet/.jsonl with a sample_id column",
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="why (required): recorded in the manifest, shown by `ptf lineage`"),
    ] = None,
    by: Annotated[str | None, typer.Option("--by", help="who retracts (default: $USER)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Publish NAME@vN+1: vN's rows, in vN's splits, minus the rows of --batch and --samples.

    The new manifest records what was retracted, by whom, why and when; later curation runs leave
    those batches and ids out, and `ptf lineage` shows the retraction. vN itself is immutable: a
    trainer pinned to it still reads exactly its rows. A retraction that matches no row publishes
    nothing (exit 2).

    Example: `ptf datasets retract sft@v3 --batch 2025-06-01 --reason "judge outage, scores invalid"`
    """
    from ptfactory.storage.retract import read_sample_ids, retract

    if reason is None or not reason.strip():
        raise UserInputError(
            "say why: --reason TEXT is required (recorded in the manifest, shown by `ptf lineage`)"
        )
    store = datasets()
    manifest = store.resolve(ref)
    ids = read_sample_ids(user_path(samples)) if samples is not None else []
    who = by or os.environ.get("USER") or "unknown"
    result = retract(store, ref, batch or [], ids, reason=reason, by=who)
    made = result.manifest
    if as_json:
        print_json({"version": made.ref, "path": result.path, "retraction": made.retraction})
        return
    for name in batch or []:
        if name not in manifest.batches:
            out.print(f"[yellow]note:[/] batch {name} is not in {manifest.ref}", highlight=False)
    removed = (made.retraction or {}).get("rows", made.rows_removed)
    out.print(
        f"retracted {removed} row(s) from {manifest.ref} -> published {made.ref} ({_split_rows(made)}); "
        f"{manifest.ref} still holds them for trainers pinned to it",
        highlight=False,
    )


@datasets_app.command("diff")
def datasets_diff(
    old: Annotated[str, typer.Argument(metavar="OLD", help="NAME@VERSION to compare from, e.g. sft@v2")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="NAME@VERSION to compare to, e.g. sft@v3")],
    limit: Annotated[int, typer.Option("--limit", help="sample ids to list per side; 0 lists all")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Rows NEW has that OLD lacks (added) and OLD has that NEW lacks (removed): counts per batch and ids.

    Example: `ptf datasets diff sft@v3 sft@v4 --limit 50`
    """
    from ptfactory.storage.diff import diff

    if limit < 0:
        raise UserInputError(f"--limit {limit}: give 0 (all ids) or a positive number")
    found = diff(datasets(), old, new, limit=limit or None)
    if as_json:
        print_json(found.to_dict())
        return
    out.print(
        f"{found.old} ({found.old_rows} rows) -> {found.new} ({found.new_rows} rows): "
        f"+{found.added} added, -{found.removed} removed, {found.unchanged} unchanged",
        highlight=False,
    )
    if found.retraction:
        record = found.retraction
        out.print(
            f"  {found.new} is a retraction from v{record.get('from')} by {record.get('by')} at "
            f"{record.get('at')}: {record.get('reason')}",
            highlight=False,
        )
    for label, count, by_batch, ids in (
        ("added", found.added, found.added_by_batch, found.added_ids),
        ("removed", found.removed, found.removed_by_batch, found.removed_ids),
    ):
        if not count:
            continue
        batches = ", ".join(f"{b} {n}" for b, n in by_batch.items())
        out.print(f"[bold]{label}[/] {count} (by batch: {batches})", highlight=False)
        for sid in ids:
            out.print(f"  {sid}", highlight=False)
        if len(ids) < count:
            out.print(f"  ... and {count - len(ids)} more (--limit 0 lists all)", highlight=False)


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@datasets_app.command("import")
def datasets_import(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help=".parquet or .jsonl: TRL columns (messages; prompt+completion; prompt+chosen+rejected), "
            "prompt+answer (rl) or sample records",
        ),
    ],
    name: Annotated[str, typer.Option("--name", help="the dataset to publish a version of")],
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            help="sft, preference or rl (default: told by the columns); a contradiction is an error",
        ),
    ] = None,
    config: ConfigOpt = Path("factory.yaml"),
    as_json: JsonOpt = False,
) -> None:
    """Publish an existing table as the next version of NAME (just its rows), with ids and provenance.

    Every row gets its sample_id, a batch import-<file sha256[:12]> (records keep their own),
    provenance.method "import" and an import decision naming the file; the rows split into train
    and validation by the config's datasets.validation_fraction. A file that fits no accepted shape,
    or a bad row (named by number, counted from 1), publishes nothing (exit 2). Rows with the same
    sample id are kept once. Rows retracted from NAME earlier stay out.

    Example: `ptf datasets import chats.jsonl --name support-sft --kind sft`
    """
    from ptfactory.assets.audit import publish_audit
    from ptfactory.assets.resources import SettingsResource
    from ptfactory.assets.resources.engines import chat_tokenizer
    from ptfactory.config import load_config
    from ptfactory.storage.importer import columns_of, detect_shape, import_table, read_file
    from ptfactory.storage.retract import retracted
    from ptfactory.storage.split import split_table
    from ptfactory.storage.versions import BaseMoved

    path = user_path(file)
    rows = read_file(path)
    digest = _sha256(path)
    table, dataset_kind = import_table(rows, kind, path.name, batch=f"import-{digest[:12]}")
    shape = detect_shape(columns_of(rows), path.name)
    given = len(rows)
    store = datasets()
    if store.versions(name):
        current = store.resolve(f"{name}@latest")
        if current.kind != dataset_kind:
            raise UserInputError(
                f"{current.ref} holds {current.kind} rows and {path.name} {dataset_kind} rows; import under "
                f"another --name"
            )
    settings = load_config(config_path(config))
    audit = publish_audit(  # the same staged, checked path as a pipeline publish (no judged batches)
        SettingsResource(config_path=str(config_path(config))), lambda: chat_tokenizer(settings), judged=False
    )
    # What the version is built from, read in this order: the latest version, then the retractions.
    # A retraction (or any version) landing in between moves the latest, which the publish checks
    # under its lock (BaseMoved): the retractions are read again, so none is undone.
    base = store.latest(name)
    for _ in range(_TRIES):
        kept, left_out = retracted(store, name).leave_out(table)
        if kept.num_rows == 0:
            raise UserInputError(
                f"every row of {path.name} was retracted from {name} earlier; nothing to publish"
            )
        splits = split_table(kept, settings.datasets.validation_fraction)
        summary = {
            "source": str(path),
            "sha256": digest,
            "shape": shape.name,
            "rows_in_file": given,
            "rows": kept.num_rows,
            "duplicates": given - table.num_rows,
            "retracted_left_out": left_out,
            "ignored_columns": list(shape.ignored),
        }
        try:
            result = store.publish(
                name,
                splits if len(splits) > 1 else splits["train"],
                kind=dataset_kind,
                config_hash=f"import:{digest}",
                shard_rows=settings.storage.shard_rows,
                batches=sorted(set(kept.column("batch").to_pylist())),
                stats={"import": summary},
                audit=audit,
                base=base,
            )
            break
        except BaseMoved:
            base = store.latest(name)
    else:
        raise PublishError(f"{name}: other versions kept landing while this import published; run it again")
    table = kept
    made = result.manifest
    if as_json:
        print_json(
            {
                "version": made.ref,
                "created": result.created,
                "path": result.path,
                "kind": dataset_kind,
                **summary,
            }
        )
        return
    if not result.created:
        out.print(f"{path.name}: unchanged, still {made.ref}", highlight=False)
        return
    out.print(
        f"imported {table.num_rows} row(s) from {path.name} ({shape.name}, {dataset_kind}) -> published "
        f"{made.ref} ({_split_rows(made)})",
        highlight=False,
    )
    notes = [
        f"{summary['duplicates']} duplicate row(s) kept once" if summary["duplicates"] else "",
        f"{left_out} row(s) left out: retracted from {name} earlier" if left_out else "",
        f"ignored columns: {', '.join(shape.ignored)}" if shape.ignored else "",
    ]
    for note in filter(None, notes):
        out.print(f"[yellow]note:[/] {note}", highlight=False)
