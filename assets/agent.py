"""``agent_tasks`` and ``agent_trajectories``: agent episodes, verified by execution and replay.

Tasks come from the files named in factory.yaml's ``agent.tasks`` (relative to factory.yaml): the
seed loader reads every JSONL under the seeds folder as instruction seeds, so agent tasks live apart
(the demo's in ``demo/agent/``). Every batch rolls them out ``agent.rollouts`` times with the
generator engine, one sandbox container per episode. A configurable share of each batch is replayed
in fresh sandboxes; one that does not reproduce is dropped as ``not_reproducible``. Difficulty is
1 - solve rate over a task's rollouts (``too_easy``, ``unsolvable``); solved trajectories become
``sft`` rows and a task's solved and failed rollouts ``preference`` pairs, which join the batch's
other rows at dedup and go through the same judges, routing and review. Personal data and secrets
in the stored rows (the model's text, tool output) are redacted as generated text is.
"""

import hashlib
import json
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from ptfactory.assets.budget import budget_metadata, metered, stage_guard
from ptfactory.assets.common import (
    check_specs,
    counts_md,
    engine_metadata,
    preview_md,
    privacy_metadata,
    schema_check,
)
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.pools import GPU_POOL
from ptfactory.assets.resources.engines import EnginesResource
from ptfactory.assets.resources.sandbox import SandboxResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.engines.budget import BudgetExhausted
from ptfactory.filters.privacy import clean_samples
from ptfactory.generators.agent.record import complete_record, trajectory_table
from ptfactory.generators.agent.tasks import AgentTask, read_tasks
from ptfactory.storage.schema import empty_table

_TASKS = pa.schema([("task_id", pa.string()), ("task", pa.string())])


def _task_files(settings: SettingsResource) -> list[Path]:
    """``agent.tasks``, relative to the factory.yaml that names them (the batch's recorded one)."""
    base = settings.config_dir
    return [
        path if (path := Path(name)).is_absolute() else base / path for name in settings.config.agent.tasks
    ]


@dg.asset(
    partitions_def=batch_partitions, group_name="agent", io_manager_key="samples_io", dagster_type=dg.Any
)
def agent_tasks(settings: SettingsResource) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """The ``kind: agent`` tasks of factory.yaml's ``agent.tasks`` files, validated (a bad row fails
    the run naming file:line and field)."""
    tasks = [task for path in _task_files(settings) for task in read_tasks(path)]
    ids = Counter(t.id for t in tasks)
    if repeated := [i for i, n in ids.items() if n > 1]:
        raise ValueError(f"agent task id {repeated[0]!r} appears in more than one row of agent.tasks")
    table = pa.Table.from_pylist([{"task_id": t.id, "task": t.to_json()} for t in tasks], schema=_TASKS)
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "files": dg.MetadataValue.text(", ".join(settings.config.agent.tasks) or "none"),
        },
    )


def _rollouts(
    settings: SettingsResource,
    engines: EnginesResource,
    sandbox: SandboxResource,
    tasks: list[AgentTask],
    batch: str,
) -> tuple[list[dict[str, Any]], Any]:
    from ptfactory.filters.execution.episode import EpisodePool
    from ptfactory.generators.agent.reference import ReferenceEngine
    from ptfactory.generators.agent.rollout import RolloutConfig, run_rollouts

    agent, workers = settings.config.agent, settings.config.sandbox.workers
    engine = engines.engine("generator")
    episodes = len(tasks) * agent.rollouts
    pool = EpisodePool(sandbox.local(agent.live_episodes(episodes, workers)), agent.command_policy())
    config = RolloutConfig(
        rollouts=agent.rollouts,
        temperature=agent.temperature,
        max_tokens=agent.max_tokens,
        seed=agent.seed,
        max_steps=agent.max_steps,
        batch=batch,
    )
    try:
        rows = run_rollouts(tasks, engine, pool, config)
        referenced = [t for t in tasks if t.solution]
        if referenced:  # reference solutions: one episode each, verified the same way
            reference = replace(config, rollouts=1, max_steps=None)
            rows += run_rollouts(referenced, ReferenceEngine(referenced), pool, reference)
        return rows, pool
    except BaseException:
        pool.close()
        raise


# An episode's tool output holds text that changes from run to run (unittest's "Ran 4 tests in
# 0.001s"), so the next step's prompt misses the response cache and the model samples anew: a rerun
# of a batch would publish new trajectories and preference pairs every time. A rerun with the same
# inputs keeps the episodes its batch already has (the key, in the stored table's metadata); one
# stopped by the budget stored none, and anything changed in the key runs them again.
EPISODES_KEY = b"ptf.agent_episodes_key"


def _episodes_key(settings: SettingsResource, engine: dict[str, str], tasks: pa.Table) -> str:
    """What decides a batch's episodes: its tasks, the agent, sandbox and privacy settings, the engine."""
    config = settings.config
    facts = {
        "tasks": tasks.column("task").to_pylist(),
        "agent": config.agent.model_dump(mode="json"),
        "sandbox": config.sandbox.model_dump(mode="json"),
        "privacy": config.privacy.model_dump(mode="json"),
        "engine": engine,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()


def _last_run(settings: SettingsResource, batch: str, key: str) -> pa.Table | None:
    """The batch's stored episodes when they were made from the same inputs, else None."""
    store = settings.asset_store()
    schema = store.schema("agent_trajectories", batch)  # the footer: the table only when it matches
    if schema is None or (schema.metadata or {}).get(EPISODES_KEY) != key.encode():
        return None
    return store.read("agent_trajectories", batch)


def _replay(rows: list[dict[str, Any]], pool: Any, share: float, batch: str) -> tuple[int, int]:
    """Replay a sample (seeded by the batch: a rerun replays the same rows); drop what does not
    reproduce. Returns (replayed, reproduced)."""
    from ptfactory.generators.agent.replay import replay_trajectory

    count = round(len(rows) * share)
    chosen = sorted(random.Random(batch).sample(range(len(rows)), count))
    # each replay in its own fresh container: up to the pool's size at once
    with ThreadPoolExecutor(max_workers=max(1, min(pool.workers, count))) as threads:
        reports = list(threads.map(lambda index: replay_trajectory(rows[index], pool), chosen))
    reproduced = 0
    for index, report in zip(chosen, reports, strict=True):
        reproduced += report.reproduced
        if not report.reproduced:
            rows[index]["decisions"] = [
                *(rows[index].get("decisions") or []),
                {
                    "stage": "replay",
                    "verdict": "drop",
                    "reason": "not_reproducible",
                    "detail": "; ".join(report.mismatches)[:2000],
                },
            ]
    return count, reproduced


@dg.asset(
    partitions_def=batch_partitions,
    group_name="agent",
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet", "docker"},
    pool=GPU_POOL,  # the generator engine; its episodes run in sandbox containers of their own
    check_specs=check_specs("agent_trajectories", ["schema_valid"]),
)
def agent_trajectories(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    engines: EnginesResource,
    sandbox: SandboxResource,
    agent_tasks: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Every task's rollouts as ``agent`` rows, a sample replayed (``not_reproducible`` dropped),
    difficulty by solve rate, and the ``sft`` and ``preference`` rows made of them."""
    from ptfactory.generators.agent.samples import is_reference, solve_rate_difficulty, training_rows

    batch = context.partition_key
    tasks = [AgentTask.from_json(t) for t in agent_tasks.column("task").to_pylist()]
    if not tasks:
        table = empty_table()
        return dg.MaterializeResult(
            value=table,
            metadata={"dagster/row_count": 0, "tasks": 0},
            check_results=[schema_check(table, "agent_trajectories")],
        )
    engine, price = engines.engine("generator"), engines.price_per_mtok("generator")
    key = _episodes_key(settings, engine.identity(), agent_tasks)
    kept = _last_run(settings, batch, key)
    if kept is not None:
        return dg.MaterializeResult(
            value=kept,
            metadata={
                "dagster/row_count": dg.MetadataValue.int(kept.num_rows),
                "tasks": dg.MetadataValue.int(len(tasks)),
                "reused": dg.MetadataValue.text(
                    "this batch's episodes from its last run: the same tasks, agent, sandbox and "
                    "privacy settings and engine (a rerun is idempotent)"
                ),
            },
            check_results=[schema_check(kept, "agent_trajectories")],
        )
    before = engine.stats.__dict__.copy()
    guard = stage_guard(context, settings, "agent_trajectories")
    try:
        with metered(guard, [(engine, price)]):
            rows, pool = _rollouts(settings, engines, sandbox, tasks, batch)
    except BudgetExhausted:
        # episodes advance together, so none finished: a rerun gets their steps from the cache
        table = empty_table()
        return dg.MaterializeResult(
            value=table,
            metadata={
                "dagster/row_count": 0,
                "budget_unfinished_tasks": len(tasks),
                **budget_metadata(guard),
            },
            check_results=[schema_check(table, "agent_trajectories")],
        )
    try:
        rows = [complete_record(r) for r in rows]
        table, repeats = trajectory_table(rows)  # rollouts that said and did the same: one sample
        unique = table.to_pylist()
        replayed, reproduced = _replay(unique, pool, settings.config.agent.replay_sample, batch)
    finally:
        pool.close()
    rates = solve_rate_difficulty(unique, Counter(r["sample_id"] for r in rows))
    derived = training_rows(unique)
    table, _ = trajectory_table([*unique, *derived])
    # steps hold the model's text and tool output (a task file's secret a command printed): redacted
    # before the rows are stored, as generated text is
    table, privacy = clean_samples(table, settings.config.privacy)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), EPISODES_KEY: key})
    references = sum(1 for r in rows if is_reference(r))
    rows = [r for r in rows if not is_reference(r)]  # the figures are the model's
    outcomes = [r["outcome"] for r in rows]
    steps = [s for r in rows for s in r["steps"]]
    kinds = Counter(r["kind"] for r in derived)
    fates = Counter(d["reason"] for r in unique for d in r["decisions"] if d["verdict"] == "drop")
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            **privacy_metadata(privacy),
            "tasks": dg.MetadataValue.int(len(tasks)),
            "episodes": dg.MetadataValue.int(len(rows)),
            "reference_episodes": dg.MetadataValue.int(references),
            "repeated_episodes": dg.MetadataValue.int(repeats),
            "solve_rate": dg.MetadataValue.float(round(sum(o["solved"] for o in outcomes) / len(rows), 4)),
            "solve_rate_by_task": dg.MetadataValue.json({k: round(v, 4) for k, v in rates.items()}),
            "mean_steps": dg.MetadataValue.float(round(len(steps) / len(rows), 3)),
            "tool_call_parse_rate": dg.MetadataValue.float(
                round(sum(s["kind"] != "unparsable" for s in steps) / max(len(steps), 1), 4)
            ),
            "violations": dg.MetadataValue.int(sum(o["violations"] for o in outcomes)),
            "replayed": dg.MetadataValue.int(replayed),
            "replay_rate": dg.MetadataValue.float(round(reproduced / replayed, 4) if replayed else 0.0),
            "tokens": dg.MetadataValue.int(
                sum(o["prompt_tokens"] + o["completion_tokens"] for o in outcomes)
            ),
            "sandbox_seconds": dg.MetadataValue.float(round(sum(o["sandbox_s"] for o in outcomes), 3)),
            "dropped_by_reason": counts_md(fates, "reason"),
            "sft_rows": dg.MetadataValue.int(kinds["sft"]),
            "preference_pairs": dg.MetadataValue.int(kinds["preference"]),
            "stop_reasons": dg.MetadataValue.md(
                "\n".join(f"- {k}: {v}" for k, v in Counter(o["stop_reason"] for o in outcomes).items())
            ),
            "policy": dg.MetadataValue.text(json.dumps({"mode": settings.config.agent.policy})),
            **engine_metadata(engine, before, price),
            **budget_metadata(guard),
            "preview": preview_md(table),
        },
        check_results=[schema_check(table, "agent_trajectories")],
    )
