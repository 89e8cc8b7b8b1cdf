"""``ptf judge``: the configured judge panel over any Parquet file, outside any batch."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ptfactory.errors import UserInputError
from ptfactory.pipelines.cli._app import app, config_path, err, user_path

if TYPE_CHECKING:
    import pyarrow as pa

_FLAGS = "pass --prompt-column and --response-column"


def _read(source: Path) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not source.is_file():
        raise UserInputError(f"{source}: no such file")
    try:
        table = pq.read_table(source)
    except (OSError, pa.ArrowException) as exc:
        reason = " ".join(str(exc).split())
        raise UserInputError(f"{source}: not a readable Parquet file ({reason})") from None
    if table.num_rows == 0:
        raise UserInputError(f"{source} has no rows; nothing to judge")
    return table


def _write(table: pa.Table, out: Path) -> None:
    """Atomically: a temp file in the same folder, fsynced, renamed over ``out``."""
    import pyarrow.parquet as pq

    from ptfactory.storage.fs import Store

    with Store(str(out.parent)).atomic_writer(str(out)) as handle:
        pq.write_table(table, handle, compression="zstd")


def _state_outside_project(config: Path) -> None:
    """No project here: models and the response cache go to PTF_HOME, else next to --config."""
    from ptfactory.home import find_project

    if find_project(Path.cwd()) is None and not os.environ.get("PTF_HOME"):
        os.environ["PTF_HOME"] = str(config.parent / ".ptf")
        err.print(
            f"[dim]not in a project: models and the response cache go to {os.environ['PTF_HOME']} "
            "(set PTF_HOME to choose)[/]",
            highlight=False,
            soft_wrap=True,
        )


def _summary(table: pa.Table, names: list[str], seconds: float) -> str:
    import numpy as np

    from ptfactory.annotators.judges import krippendorff_alpha

    rows = table.num_rows
    parts = []
    matrix = []
    for name in names:
        values = table.column(f"judge_{name}").to_numpy(zero_copy_only=False).astype(float)
        matrix.append(values)
        counted = int(np.sum(~np.isnan(values)))
        mean = f", mean {np.nanmean(values):.2f}" if counted else ""
        parts.append(f"{name} {counted}/{rows} counted{mean}")
    alpha = krippendorff_alpha(np.vstack(matrix)) if matrix else None
    means = table.column("judge_mean").drop_null().to_pylist()
    panel = f"panel mean {sum(means) / len(means):.2f} over {len(means)} rows" if means else "no row scored"
    agreement = f"; alpha {alpha:.2f}" if alpha is not None else ""
    return f"{rows} rows judged in {seconds:.1f} s; {panel}{agreement}; " + "; ".join(parts)


@app.command()
def judge(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="IN.parquet",
            help="rows to judge: a `messages` column (the sample schema) or prompt/response text columns",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="OUT.parquet", help="the rows plus the judges' scores (written atomically)"
        ),
    ],
    config: Annotated[
        Path,
        typer.Option("--config", metavar="factory.yaml", help="factory.yaml whose `judges` form the panel"),
    ] = Path("factory.yaml"),
    prompt_column: Annotated[
        str | None, typer.Option("--prompt-column", metavar="COLUMN", help="the prompt's text column")
    ] = None,
    response_column: Annotated[
        str | None, typer.Option("--response-column", metavar="COLUMN", help="the response's text column")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="replace OUT.parquet if it exists")] = False,
    execute: Annotated[
        bool,
        typer.Option(
            "--execute/--no-execute",
            help="run code rows (`tests` + `entry_point` columns) in the sandbox for the execution judge",
        ),
    ] = True,
) -> None:
    """Score every row of IN.parquet with the judge panel of factory.yaml.

    The text comes from --prompt-column/--response-column, else a `messages` column, else the first
    pair found of prompt/response, instruction/output, instruction/response, question/answer,
    query/response, input/output, prompt/completion. Writes every input column plus `judge_mean`,
    `judge_spread`, `judge_confidence` and `judge_<name>` per judge (null where its vote did not
    count). OUT.parquet appears whole or not at all; an existing one is replaced only with --force.
    Bad input is one `error:` line, exit 2, and nothing written. Outside a project pass --config
    (or set PTF_HOME); models and the response cache then go next to the config file.

    Example: `ptf judge answers.parquet --out judged.parquet --prompt-column question --response-column reply`
    """
    from ptfactory.annotators.judges import ExecutionJudge
    from ptfactory.annotators.judges.standalone import ColumnError, detect_columns, judge_rows, score_table
    from ptfactory.config import load_config

    src, dst = user_path(source), user_path(out)
    if dst.is_dir():
        raise UserInputError(f"--out {dst} is a folder; name a .parquet file")
    if dst.exists() and not force:
        raise UserInputError(f"{dst} exists; pass --force to replace it")
    table = _read(src)
    try:
        columns = detect_columns(table, prompt_column, response_column)
        rows = judge_rows(table, columns)
    except ColumnError as exc:
        raise UserInputError(f"{src}: {exc.message(_FLAGS)}") from None
    except UserInputError as exc:
        raise UserInputError(f"{src}: {exc}") from None
    cfg = config_path(config)
    settings = load_config(cfg, required=config != Path("factory.yaml"))
    _state_outside_project(cfg)

    from ptfactory.assets.resources import FactoryResource

    resource = FactoryResource(config_path=str(cfg))
    panel = resource.panel()
    needs_sandbox = execute and any(isinstance(j, ExecutionJudge) for j in panel.judges)
    code = sum(1 for r in rows if r["kind"] == "code" and r["tests"] and r["entry_point"])
    sandbox: Any = None
    started = time.perf_counter()
    try:
        if needs_sandbox and code:
            from ptfactory.filters.execution import open_sandbox

            sandbox = open_sandbox(
                settings.sandbox.limits(), settings.sandbox.workers, settings.sandbox.backend
            )
        err.print(
            f"judging {len(rows)} rows ({columns.describe()}) with {len(panel.judges)} judges",
            highlight=False,
            soft_wrap=True,
        )
        scored = score_table(
            table,
            panel,
            prompt_column=prompt_column,
            response_column=response_column,
            sandbox=sandbox,
            limits=settings.sandbox.limits(),
            progress=_progress(),
        )
    finally:
        if sandbox is not None:
            sandbox.close()
        resource.teardown_after_execution(None)  # type: ignore[arg-type]  # outside Dagster: no context
    _write(scored, dst)
    err.print(
        _summary(scored, [j.name for j in panel.judges], time.perf_counter() - started),
        highlight=False,
        soft_wrap=True,
    )
    typer.echo(str(dst))


def _progress() -> Any:
    """Rows judged / total on stderr, one line per batch (readable in logs as on a terminal)."""
    started = time.perf_counter()

    def report(done: int, total: int) -> None:
        if done:
            rate = done / (time.perf_counter() - started)
            err.print(f"judged {done}/{total} rows ({rate:.2f} rows/s)", highlight=False, soft_wrap=True)

    return report
