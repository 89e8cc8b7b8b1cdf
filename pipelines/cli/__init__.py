"""``ptf``: the factory's command line, one module per command group.

=================  ===========================================================
module             commands
=================  ===========================================================
``init``           ``ptf init``
``run``            ``ptf run``
``datasets``       ``ptf datasets list|show|tag|reindex``
``datasets_edit``  ``ptf datasets retract|diff|import``
``datasets_gc``    ``ptf datasets gc``
``pull``           ``ptf pull``, ``ptf lineage``
``files``          ``ptf dedup``, ``ptf validate``
``decontaminate``  ``ptf decontaminate`` (a table file or a published version vs benchmarks)
``sandbox``        ``ptf sandbox build|run``
``agent``          ``ptf agent run|replay``
``seeds``          ``ptf seeds procedural``
``annotate``       ``ptf annotate up|down|status|adduser|push|pull``
``train``          ``ptf train``
``eval``           ``ptf eval``
``judge``          ``ptf judge``
``judge_probe``    ``ptf judge-probe`` (attacks on the configured panel)
``ui``             ``ptf ui``, ``ptf doctor``
=================  ===========================================================

Exit codes: 0 ok, 1 failure, 2 bad input (a usage error or a :class:`UserInputError`).
"""

from __future__ import annotations

import signal
import sys

import typer

from ptfactory.errors import FactoryError
from ptfactory.pipelines.cli._app import app, err

# The command modules register themselves on `app` when imported, in the order `ptf --help` lists
# them (the groups datasets, sandbox and annotate come after the plain commands).
# isort: off
from ptfactory.pipelines.cli import (  # noqa: F401 - imported for their registration
    init,
    run,
    datasets,
    datasets_edit,
    datasets_gc,
    pull,
    files,
    decontaminate,
    judge,
    judge_probe,
    sandbox,
    agent,
    seeds,
    annotate,
    train,
    eval,
    ui,
)
# isort: on

__all__ = ["app", "main"]


def _click_errors() -> tuple[type[BaseException], ...]:
    """The ClickException classes typer raises: its vendored copy where it has one, else click's."""
    import click

    found: list[type[BaseException]] = [click.ClickException]
    try:
        from typer._click import exceptions as vendored  # type: ignore[import-not-found,unused-ignore]

        found.append(vendored.ClickException)
    except ImportError:
        pass
    return tuple(found)


def _stoppable_children() -> None:
    """An ignored SIGTERM is inherited by every process ptf starts (Dagster's compute-log ``tail``
    processes among them), and Dagster stops those with SIGTERM: under a parent that ignores it,
    each step waited 30 s and left tails behind holding ptf's stdout, so a caller reading that
    pipe to its end never returned. ptf and its children take SIGTERM's default again."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main() -> None:
    """Console entry point: FactoryErrors become one red line and their exit code; usage errors
    print the usage line and the reason and exit 2; never a traceback for either."""
    _stoppable_children()
    try:
        code = app(standalone_mode=False, prog_name="ptf")
    except FactoryError as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:
        if isinstance(exc, _click_errors()):
            exc.show()  # type: ignore[attr-defined]
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        raise
    # click returns the code of a typer.Exit instead of raising it when not standalone
    sys.exit(code if isinstance(code, int) else 0)
