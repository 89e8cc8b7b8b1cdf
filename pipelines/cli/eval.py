"""``ptf eval``: a model on verifiable tasks; a report with intervals, pass@k, stability, efficiency
and safety; failures back into seeds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ptfactory.errors import UserInputError
from ptfactory.pipelines.cli._app import app, config_path, err, out, print_json, user_path

if TYPE_CHECKING:
    from ptfactory.config import FactoryConfig
    from ptfactory.training.eval.config import EvalSection
    from ptfactory.training.eval.evaluate import EvalResult


def _settings(loaded: FactoryConfig, **flags: Any) -> EvalSection:
    """factory.yaml's ``eval:`` with the flags given on the command line over it (validated again:
    a flag is held to the section's bounds like the file is)."""
    from pydantic import ValidationError

    given = {k: v for k, v in flags.items() if v is not None}
    try:
        return type(loaded.eval).model_validate({**loaded.eval.model_dump(), **given})
    except ValidationError as exc:
        error = exc.errors()[0]
        flag = "--" + str(error["loc"][0]).replace("_", "-")
        raise UserInputError(f"{flag} {error.get('input')}: {error['msg']}") from None


def _print(result: EvalResult) -> None:
    from rich.table import Table

    summary = result.report["summary"]
    table = Table(
        "family",
        "tasks",
        "success",
        "95% CI",
        "pass@k",
        "stable",
        "no answer",
        "tokens",
        "s/rollout",
        "violations",
    )
    rows = [*summary["families"].items(), ("overall", summary["overall"])]
    for name, s in rows:
        low, high = s["ci95"] or (0.0, 0.0)
        passk = ", ".join(f"@{k} {v:.2f}" for k, v in s["pass_at_k"].items())
        stable = "-" if s["stability"] is None else f"{s['stability']:.2f}"
        eff = s["efficiency"]
        table.add_row(
            name,
            str(s["tasks"]),
            f"{s['success_rate']:.3f}",
            f"[{low:.3f}, {high:.3f}]",
            passk,
            stable,
            str(s["no_answer"]["count"]),
            f"{eff['completion_tokens_mean']:.0f}",
            f"{eff['seconds_per_rollout']:.2f}",
            str(s["safety"]["violations"]),
        )
    out.print(table)


@app.command("eval")
def eval_command(
    model: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help="a checkpoint folder (`ptf train --output DIR`), 'bundled', or an engine of factory.yaml "
            "(generator, student)",
        ),
    ],
    tasks: Annotated[
        list[str],
        typer.Option(
            "--tasks",
            metavar="TASKS",
            help="a task file (.jsonl/.parquet, seed format; kind agent rows too), rg:<family>:<n>[:seed=<s>], "
            "humaneval[:<n>], gsm8k[:<n>[:seed=<s>]], or NAME@VERSION[:SPLIT]; repeatable",
        ),
    ],
    rollouts: Annotated[
        int | None,
        typer.Option(
            "--rollouts", min=1, help="answers per task (pass@k for k <= K) (default: eval.rollouts, 1)"
        ),
    ] = None,
    report_out: Annotated[
        Path | None,
        typer.Option("--out", metavar="REPORT.json", help="write the report here (and samples beside)"),
    ] = None,
    config: Annotated[
        Path,
        typer.Option(
            "--config", help="factory.yaml (engines, sandbox, agent policy; `eval:` defaults under the flags)"
        ),
    ] = Path("factory.yaml"),
    temperature: Annotated[
        float | None,
        typer.Option(
            min=0.0, help="sampling temperature (default: eval.temperature; 0 at one rollout, else 0.7)"
        ),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="tokens per answer (default: eval.max_tokens, 256)")
    ] = None,
    seed: Annotated[int | None, typer.Option(min=0, help="sampling seed (default: eval.seed, 0)")] = None,
    failures_to_seeds: Annotated[
        Path | None,
        typer.Option(
            "--failures-to-seeds",
            metavar="NEW.jsonl",
            help="write a seed file aimed at what failed (new procedural instances, evol-instruct variants)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report's summary as JSON")] = False,
) -> None:
    """Evaluate MODEL on verifiable tasks through the factory's engine and verifiers (code and agent
    steps only in the sandbox). The report gives, per family and overall: success rate with a 95%
    interval (bootstrap over tasks; Wilson too at one rollout), pass@k (unbiased, n = K), stability
    (tasks whose rollouts agree), no-answer share, tokens/steps/seconds, and what the sandbox
    stopped; per-rollout records go beside it (REPORT.samples.jsonl). A checkpoint's report is also
    stored beside it and listed by `ptf datasets show` for the version it was trained on.

    Examples: `ptf eval bundled --tasks rg:chain_sum:50:seed=1 --out chain.json`;
    `ptf eval runs/sft-v3 --tasks sft@v3 --tasks humaneval:20 --rollouts 4 --out report.json`
    """
    from ptfactory.config import load_config
    from ptfactory.filters.execution import open_sandbox
    from ptfactory.home import local_state_dir
    from ptfactory.training.eval.evaluate import evaluate, load_all
    from ptfactory.training.eval.model import resolve_model

    if not tasks:
        raise typer.BadParameter("name the tasks: --tasks FILE|rg:<family>:<n>|humaneval|gsm8k|NAME@VERSION")
    target = user_path(report_out) if report_out else None
    if target is not None and (target.is_dir() or target.suffix != ".json"):
        raise UserInputError(f"--out {target}: name a .json file for the report")
    seeds_path = user_path(failures_to_seeds) if failures_to_seeds else None
    if seeds_path is not None and seeds_path.suffix != ".jsonl":
        raise UserInputError(f"--failures-to-seeds {seeds_path}: seed files are JSONL; name a .jsonl file")
    loaded = load_config(config_path(config))
    settings = _settings(loaded, rollouts=rollouts, temperature=temperature, max_tokens=max_tokens, seed=seed)
    specs = [str(user_path(Path(t))) if Path(t).suffix in (".jsonl", ".parquet") else t for t in tasks]
    resolved = resolve_model(
        model, {"generator": loaded.engines.generator, "student": loaded.engines.student}
    )
    datasets = _datasets_if_home()
    chosen = load_all(specs, datasets)  # a bad row fails here, before any model loads
    sandbox_settings = loaded.sandbox

    def sandbox() -> Any:
        return open_sandbox(sandbox_settings.limits(), sandbox_settings.workers, sandbox_settings.backend)

    err.print(f"{len(chosen)} tasks from {', '.join(tasks)}; model {model}", highlight=False, soft_wrap=True)
    result = evaluate(
        resolved,
        specs,
        settings,
        tasks=chosen,
        cache_path=local_state_dir() / "cache" / "responses.sqlite",
        sandbox=sandbox,
        policy=loaded.agent.command_policy(),
        datasets=datasets,
        out=target,
        say=lambda line: err.print(line, highlight=False),
    )
    if seeds_path is not None:
        _failure_seeds(result, chosen, seeds_path, target, loaded)
    if as_json:
        print_json(result.report["summary"])
    else:
        _print(result)
    for path in result.paths:
        err.print(f"report -> {path}", highlight=False)


def _datasets_if_home() -> Any:
    """The factory's datasets (versions as tasks, the catalog for lineage), where there is a home."""
    import os

    from ptfactory.home import find_project

    if os.environ.get("PTF_HOME") or find_project() is not None:
        from ptfactory.pipelines.cli._app import datasets

        return datasets()
    return None


def _failure_seeds(
    result: EvalResult, tasks: list[Any], path: Path, report_path: Path | None, loaded: FactoryConfig
) -> None:
    from ptfactory.engines.spec import build_engine
    from ptfactory.filters.decontamination import load_index
    from ptfactory.home import local_state_dir, project_root
    from ptfactory.training.eval.failures import failure_seeds, write_failure_seeds

    index = load_index(loaded.decontamination, local_state_dir(), project_root())
    engine = build_engine(loaded.engines.generator, local_state_dir() / "cache" / "responses.sqlite")
    try:
        seeds = failure_seeds(
            result.report,
            tasks,
            engine=engine,
            index=index,
            say=lambda line: err.print(line, highlight=False),
        )
    finally:
        engine.close()
    write_failure_seeds(seeds, path, result.report, report_path)
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(seeds.skipped.items()))
    err.print(
        f"{len(seeds.rows)} seeds aimed at failures of run {result.run_id} -> {path}"
        + (f" (left out: {skipped})" if skipped else ""),
        highlight=False,
        soft_wrap=True,
    )
