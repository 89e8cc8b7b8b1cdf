"""``ptf agent``: run agent tasks as sandboxed multi-turn episodes, replay a recorded trajectory."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ptfactory.errors import UserInputError
from ptfactory.pipelines.cli._app import app, config_path, datasets, err, print_json, user_path

if TYPE_CHECKING:
    from ptfactory.filters.execution.commands import CommandPolicy
    from ptfactory.filters.execution.episode import EpisodePool

agent_app = typer.Typer(
    help="Agent trajectories: episodes of tool calls in the sandbox, verified by execution and replay.",
    no_args_is_help=True,
)
app.add_typer(agent_app, name="agent")


def _policy(allow: list[str] | None, deny: list[str] | None) -> CommandPolicy:
    from ptfactory.filters.execution.commands import DEFAULT_DENY, CommandPolicy

    if allow and deny:
        raise UserInputError("give --allow (an allow-list) or --deny (more refused commands), not both")
    if allow:
        return CommandPolicy("allow", tuple(allow))
    return CommandPolicy("deny", (*DEFAULT_DENY, *(deny or [])))


def _pool(config: Path, workers: int | None, policy: CommandPolicy, episodes: int) -> EpisodePool:
    from ptfactory.config import load_config
    from ptfactory.filters.execution import open_sandbox
    from ptfactory.filters.execution.episode import EpisodePool

    loaded = load_config(config_path(config))
    settings = loaded.sandbox
    live = workers or loaded.agent.live_episodes(episodes, settings.workers)
    sandbox = open_sandbox(settings, live, settings.backend)
    try:
        return EpisodePool(sandbox, policy)
    except BaseException:
        sandbox.close()
        raise


@agent_app.command("run")
def agent_run(
    tasks: Annotated[
        Path, typer.Argument(metavar="TASKS.jsonl", help="kind-agent task rows, one JSON object a line")
    ],
    out: Annotated[Path, typer.Option("--out", help="trajectory Parquet file to write")],
    rollouts: Annotated[int, typer.Option("--rollouts", min=1, help="episodes per task")] = 1,
    config: Annotated[
        Path, typer.Option("--config", help="factory.yaml (engines.generator, sandbox, agent.policy)")
    ] = Path("factory.yaml"),
    max_steps: Annotated[int | None, typer.Option(min=1, help="cap every task's step budget")] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="tokens per reply")] = 256,
    temperature: Annotated[float, typer.Option(min=0.0, help="sampling temperature")] = 0.7,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1, help="live episodes (containers) at once [default: factory.yaml's agent.workers]"
        ),
    ] = None,
    allow: Annotated[
        list[str] | None, typer.Option(help="allow-list mode: only these commands run (repeatable)")
    ] = None,
    deny: Annotated[
        list[str] | None, typer.Option(help="refuse this command too, e.g. 'git push' (repeatable)")
    ] = None,
    force: Annotated[bool, typer.Option(help="replace --out if it exists")] = False,
) -> None:
    """Run every task ROLLOUTS times with the generator engine, each episode in its own sandbox
    container, and write one trajectory row per episode (messages with tool calls, per-step
    exit codes, workspace hashes, rewards, outcome).

    Example: `ptf agent run demo/agent/tasks.jsonl --out trajectories.parquet --rollouts 2`
    """
    from ptfactory.assets.resources import EnginesResource, SettingsResource
    from ptfactory.config import load_config
    from ptfactory.generators.agent.record import write_trajectories
    from ptfactory.generators.agent.rollout import RolloutConfig, run_rollouts
    from ptfactory.generators.agent.tasks import read_tasks

    source, target = user_path(tasks), user_path(out)
    if target.exists() and not force:
        raise UserInputError(f"{target} exists; pass --force to replace it")
    loaded = read_tasks(source)
    # no --allow/--deny: factory.yaml's agent policy (by default the built-in deny-list)
    policy = (
        _policy(allow, deny) if allow or deny else load_config(config_path(config)).agent.command_policy()
    )
    engine = EnginesResource(settings=SettingsResource(config_path=str(config_path(config)))).engine(
        "generator"
    )
    pool = _pool(config, workers, policy, len(loaded) * rollouts)
    started = time.perf_counter()
    err.print(
        f"{len(loaded)} tasks × {rollouts} rollouts with {engine.model_id} ({engine.backend})",
        highlight=False,
    )
    try:
        rows = run_rollouts(
            loaded,
            engine,
            pool,
            RolloutConfig(
                rollouts=rollouts, temperature=temperature, max_tokens=max_tokens, max_steps=max_steps
            ),
            progress=lambda line: err.print(line, highlight=False),
        )
    finally:
        pool.close()
        engine.close()
    repeats = write_trajectories(rows, target)
    outcomes = [r["outcome"] for r in rows]
    steps = sum(o["n_steps"] for o in outcomes)
    solved = sum(o["solved"] for o in outcomes)
    parsed = sum(o["parse_rate"] * o["n_steps"] for o in outcomes)
    same = f" ({repeats} repeated another and were written once)" if repeats else ""
    err.print(
        f"{len(rows)} episodes{same}, {solved} solved, {steps} steps, parse rate "
        f"{parsed / max(steps, 1):.0%}, {time.perf_counter() - started:.1f}s -> {target}",
        highlight=False,
    )


def _from_file(path: Path, sample_id: str) -> dict[str, Any]:
    from ptfactory.generators.agent.record import read_trajectories

    rows = [r for r in read_trajectories(path) if r["sample_id"].startswith(sample_id)]
    if len(rows) != 1:
        what = "no trajectory" if not rows else f"{len(rows)} trajectories"
        raise UserInputError(f"{what} in {path} with a sample_id starting {sample_id!r}; give more of the id")
    return rows[0]


def _from_catalog(sample_id: str) -> dict[str, Any]:
    from ptfactory.errors import DatasetRefError
    from ptfactory.storage.assetstore import AssetStore
    from ptfactory.storage.lineage import lineage

    try:
        row = lineage(sample_id, datasets(), AssetStore())["record"]
    except DatasetRefError as exc:
        raise UserInputError(f"{exc}; or read it from a file with --from OUT.parquet") from exc
    if not row or not (row.get("outcome") or {}).get("task"):
        raise UserInputError(
            f"sample {sample_id!r} is a {(row or {}).get('kind')} row with no recorded episode, "
            "not an agent trajectory"
        )
    return dict(row)


@agent_app.command("replay")
def agent_replay(
    sample_id: Annotated[
        str, typer.Argument(metavar="SAMPLE_ID", help="a trajectory's sample_id (a unique prefix will do)")
    ],
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="a trajectory Parquet file written by `ptf agent run` (default: the catalog: published "
            "versions, then the factory's stage outputs)",
        ),
    ] = None,
    config: Annotated[Path, typer.Option("--config", help="factory.yaml (sandbox)")] = Path("factory.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Re-execute a trajectory's recorded calls in a fresh sandbox; exit 0 only when every step's
    exit code and workspace hash and the final check reproduce.

    The trajectory is found by its id in the catalog (published versions, then the factory's stage
    outputs, as `ptf lineage` finds a sample), or in the Parquet file given by --from.

    Example: `ptf agent replay 3f2a9c`; also `ptf agent replay 3f2a9c --from trajectories.parquet`
    """
    from ptfactory.generators.agent.replay import recorded_policy, replay_trajectory

    row = _from_file(user_path(source), sample_id) if source is not None else _from_catalog(sample_id)
    pool = _pool(config, 1, recorded_policy(row) or _policy(None, None), 1)
    try:
        report = replay_trajectory(row, pool)
    finally:
        pool.close()
    if as_json:
        print_json(report.to_dict())
    else:
        for line in report.mismatches:
            sys.stderr.write(f"mismatch: {line}\n")
        err.print(
            f"{report.sample_id[:12]} ({report.task_id}): {report.steps_checked} steps replayed, "
            f"{'reproduced' if report.reproduced else 'NOT reproduced'}, solved={report.solved}",
            highlight=False,
        )
    raise typer.Exit(0 if report.reproduced else 1)
