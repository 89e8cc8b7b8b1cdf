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

    from ptfactory.assets.resources.engines import EnginesResource

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


def configured_panel(config: Path, *, execute: bool) -> tuple[Any, EnginesResource]:
    """The panel of the factory.yaml at ``config`` (absent: the defaults): verifiers first, its
    calibration store under the state dir, the sandbox opened only if a row needs it (``execute``);
    its engines come from the factory's engines resource (one per distinct spec, a remote engine's
    requests redacted under ``privacy``), to close after."""
    from ptfactory.assets.resources.engines import EnginesResource
    from ptfactory.assets.resources.settings import SettingsResource
    from ptfactory.filters.execution import open_sandbox
    from ptfactory.panel_config import build_panel

    resource = SettingsResource(config_path=str(config))
    engines = EnginesResource(settings=resource)
    settings = resource.config
    limits = settings.sandbox

    def sandbox() -> Any:
        return open_sandbox(limits, limits.workers, limits.backend)

    panel = build_panel(
        settings.judges,
        settings.judging,
        settings.engines.generator,
        engine=engines.engine,
        sandbox=sandbox if execute else None,
        limits=limits,
        store=resource.state_dir,
    )
    return panel, engines


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
            "--out", metavar="OUT.parquet", help="the rows plus the panel's scores (written atomically)"
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
    reference_column: Annotated[
        str | None,
        typer.Option(
            "--reference-column",
            metavar="COLUMN",
            help="the reference answer (`18`, or a worked solution ending `#### 18`): the answer verifier "
            "checks each response's final answer against it with math-verify; an option letter (`B`) or "
            "yes/no reference is compared as text",
        ),
    ] = None,
    tests_column: Annotated[
        str | None,
        typer.Option(
            "--tests-column",
            metavar="COLUMN",
            help="tests defining check(candidate) (HumanEval) or top-level asserts (MBPP): the code verifier runs them in the sandbox",
        ),
    ] = None,
    entry_point_column: Annotated[
        str | None,
        typer.Option(
            "--entry-point-column",
            metavar="COLUMN",
            help="the function the tests check (default: the one function a reply defines, else the prompt stub's last)",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="replace OUT.parquet if it exists")] = False,
    execute: Annotated[
        bool,
        typer.Option(
            "--execute/--no-execute",
            help="run code rows' tests in the sandbox (--no-execute: the code verifier abstains on them)",
        ),
    ] = True,
) -> None:
    """Score every row of IN.parquet with the panel of factory.yaml: verifiers first, then the judges.

    The text comes from --prompt-column/--response-column, else a `messages` column, else the first
    pair found of prompt/response, instruction/output, instruction/response, question/answer,
    query/response, input/output, prompt/completion. Where a check exists it decides: the answer
    verifier against --reference-column (or a sample-schema `reference`), the code verifier with
    --tests-column and --entry-point-column (or `tests`/`entry_point` columns). The judges' weights
    are earned on this table where verifiers label at least 5 rows of each class (else the weights
    the calibration store holds for each judge's identity, or 0), exactly as in the factory.

    Writes every input column plus `judge_mean`, `judge_spread`, `judge_confidence`, `judge_votes`
    (independent counted votes: the factory auto-accepts on two), `judge_<name>` per verifier and
    judge (null where its vote did not count), `verdict_<name>` per verifier and `verifiers` (the
    verdicts with their evidence, JSON). OUT.parquet appears whole or not at all; an existing one is
    replaced only with --force. Bad input is one `error:` line, exit 2, and nothing written. Outside
    a project pass --config (or set PTF_HOME); models and the response cache then go next to it.

    Example: `ptf judge answers.parquet --out judged.parquet --prompt-column question --response-column reply --reference-column gold`
    """
    from ptfactory.annotators.judges.standalone import ColumnError, detect_columns, judge_rows, score_table
    from ptfactory.config import load_config

    src, dst = user_path(source), user_path(out)
    if dst.is_dir():
        raise UserInputError(f"--out {dst} is a folder; name a .parquet file")
    if dst.exists() and not force:
        raise UserInputError(f"{dst} exists; pass --force to replace it")
    table = _read(src)
    named = {
        "prompt_column": prompt_column,
        "response_column": response_column,
    }
    checks = {
        "reference_column": reference_column,
        "tests_column": tests_column,
        "entry_point_column": entry_point_column,
    }
    try:
        columns = detect_columns(table, **named)
        rows = judge_rows(table, columns, **checks)
    except ColumnError as exc:
        raise UserInputError(f"{src}: {exc.message(_FLAGS)}") from None
    except UserInputError as exc:
        raise UserInputError(f"{src}: {exc}") from None
    cfg = config_path(config)
    load_config(cfg, required=config != Path("factory.yaml"))  # a named file must exist and validate
    _state_outside_project(cfg)
    panel, engines = configured_panel(cfg, execute=execute)
    started = time.perf_counter()
    try:
        verifiers = ", ".join(panel.verifiers.names) if panel.verifiers else "none"
        err.print(
            f"judging {len(rows)} rows ({columns.describe()}) with verifiers {verifiers} and "
            f"{len(panel.judges)} judges",
            highlight=False,
            soft_wrap=True,
        )
        scored, report = score_table(table, panel, **named, **checks, progress=_progress())
    finally:
        engines.close()
    _write(scored, dst)
    names = [*(panel.verifiers.names if panel.verifiers else []), *(j.name for j in panel.judges)]
    err.print(_summary(scored, names, time.perf_counter() - started), highlight=False, soft_wrap=True)
    err.print(f"verifiers: {report.verdicts_line()}", highlight=False, soft_wrap=True)
    err.print(f"judge weights on this table: {report.weights_line()}", highlight=False, soft_wrap=True)
    if report.self_preference:
        err.print(f"[yellow]warning:[/] {report.self_preference}", highlight=False, soft_wrap=True)
    typer.echo(str(dst))


def _progress() -> Any:
    """Rows judged / total on stderr, one line per batch (readable in logs as on a terminal)."""
    started = time.perf_counter()

    def report(done: int, total: int) -> None:
        if done:
            rate = done / (time.perf_counter() - started)
            err.print(f"judged {done}/{total} rows ({rate:.2f} rows/s)", highlight=False, soft_wrap=True)

    return report
