"""``ptf judge-probe``: attacks on the configured judge panel, and how far each moves its scores."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from ptfactory.pipelines.cli._app import app, config_path, err
from ptfactory.pipelines.cli.judge import _state_outside_project, configured_panel


@app.command("judge-probe")
def judge_probe(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            metavar="factory.yaml",
            help="factory.yaml whose `judges`, `judging` and `routing` to probe",
        ),
    ] = Path("factory.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON on stdout")] = False,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="draw the probes' items and wording with this seed (default: fresh each run)"
        ),
    ] = None,
) -> None:
    """Try to fool the configured panel, and say how far each attack moves each judge and the panel.

    Half the probe set is open-ended rows no verifier covers, half word problems the answer verifier
    covers; items and wording are drawn at random each run (--seed repeats a run): grader-override
    text appended to a wrong answer, a reply that restates the prompt, verbose padding, the A/B order
    swapped (each LLM judge's position bias), an empty and an unparseable reply, and sandbox faults
    (code that kills its runner, sleeps past the limit, or exits before its tests; a sandbox that
    breaks on its own side). Prints per probe and member the mean score shift (probed minus its
    baseline) and how many probed rows it counted.

    Exits 1 when override text lifts a wrong answer over the accept line (routing accepts it, or its
    panel mean crosses routing.accept_at), when a sandbox fault becomes a student's failure, or when
    a solution-caused fault is not the solution's failure. The report is kept per panel identity
    under the state dir (the factory's asset check reads it).

    Example: `ptf judge-probe --config factory.yaml --seed 4 --json`
    """
    from ptfactory.annotators.judges.probes import ProbeReport, panel_identity, probe_panel
    from ptfactory.config import load_config
    from ptfactory.storage.fs import atomic_write_text

    cfg = config_path(config)
    settings = load_config(cfg, required=config != Path("factory.yaml"))
    _state_outside_project(cfg)
    panel, engines = configured_panel(cfg, execute=True)
    started = time.perf_counter()
    try:
        members = [*(panel.verifiers.names if panel.verifiers else []), *(j.name for j in panel.judges)]
        err.print(f"probing the panel: {', '.join(members)}", highlight=False, soft_wrap=True)
        report: ProbeReport = probe_panel(panel, settings.routing, seed=seed)
        path = engines.settings.state_dir / "probes" / f"{panel_identity(panel, settings.routing)}.json"
        atomic_write_text(path, json.dumps(report.to_dict(), indent=1) + "\n")
    finally:
        engines.close()
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=1))
    else:
        typer.echo(report.table())
    err.print(
        f"probed in {time.perf_counter() - started:.0f} s (seed {report.seed}, panel {report.identity}); "
        + (
            "[green]no probe fooled the panel[/]"
            if report.passed
            else "[red]" + "; ".join(report.failures) + "[/]"
        ),
        highlight=False,
        soft_wrap=True,
    )
    if not report.passed:
        raise typer.Exit(1)
