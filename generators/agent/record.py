"""The trajectory table: one row per episode, written to Parquet atomically.

Close to what sample schema v2 will hold: ``messages`` with assistant ``tool_calls`` (OpenAI
form: id, type, function name and JSON arguments) and ``tool`` messages with ``tool_call_id``;
a ``tools`` column (the JSON-schema tool specs); and per step the call, exit code, duration,
output tail, workspace hash, tokens and reward.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.errors import UserInputError

__all__ = ["TRAJECTORY_SCHEMA", "read_trajectories", "write_trajectories"]

_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(_CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
STEP = pa.struct(
    [
        ("index", pa.int32()),
        ("kind", pa.string()),  # tool | final | unparsable | invalid | policy_violation
        ("name", pa.string()),
        ("arguments", pa.string()),  # JSON
        ("status", pa.string()),
        ("exit_code", pa.int32()),
        ("duration_ms", pa.float64()),
        ("output_tail", pa.string()),
        ("tree_hash", pa.string()),
        ("error", pa.string()),
        ("checked", pa.bool_()),
        ("check_exit", pa.int32()),
        ("check_hash", pa.string()),
        ("tests_passed", pa.int32()),
        ("tests_total", pa.int32()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("finish_reason", pa.string()),  # the engine's: "length" marks a reply cut at max_tokens
        ("reward", pa.float64()),
    ]
)
TRAJECTORY_SCHEMA = pa.schema(
    [
        ("sample_id", pa.string()),
        ("kind", pa.string()),
        ("task_id", pa.string()),
        ("rollout", pa.int32()),
        ("instruction", pa.string()),
        ("task", pa.string()),  # the whole task as JSON (workspace included): replay needs nothing else
        ("tools", pa.string()),  # JSON list of tool specs
        ("messages", pa.list_(MESSAGE)),
        ("steps", pa.list_(STEP)),
        ("initial_hash", pa.string()),
        ("initial_check", STEP),
        ("solved", pa.bool_()),
        ("stop_reason", pa.string()),
        ("n_steps", pa.int32()),
        ("wall_s", pa.float64()),
        ("sandbox_s", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("parse_rate", pa.float64()),
        ("violations", pa.int32()),
        ("reward", pa.float64()),
        ("model", pa.string()),
        ("policy", pa.string()),  # the command policy as JSON {mode, rules}: replay applies the same
    ]
)


def _complete(row: dict[str, Any]) -> dict[str, Any]:
    """Every step and message with all its fields (absent ones null), as the schema wants."""
    steps = [{name: s.get(name) for name in STEP.names} for s in row["steps"]]
    messages = [{name: m.get(name) for name in MESSAGE.names} for m in row["messages"]]
    initial = {name: row["initial_check"].get(name) for name in STEP.names}
    return {**row, "steps": steps, "messages": messages, "initial_check": initial}


def write_trajectories(rows: list[dict[str, Any]], path: Path) -> None:
    table = pa.Table.from_pylist([_complete(r) for r in rows], schema=TRAJECTORY_SCHEMA)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def read_trajectories(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UserInputError(f"{path}: no such trajectory file; write one with `ptf agent run`")
    table = pq.read_table(path)
    missing = [n for n in ("sample_id", "task", "steps") if n not in table.column_names]
    if missing:
        raise UserInputError(f"{path}: not a trajectory table (no column {missing[0]!r})")
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows
