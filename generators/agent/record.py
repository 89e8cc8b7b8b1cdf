"""Trajectories as sample records (schema 2, :mod:`ptfactory.storage.schema.record`), and their file.

A trajectory is a row of kind ``agent``: ``messages`` with assistant ``tool_calls`` and ``tool``
messages, the ``tools`` offered, per-step records in ``steps`` and the episode's ``outcome``
(which holds the task and the command policy: replay needs nothing else). ``ptf agent run``
writes such rows to one Parquet file, atomically; the factory's ``agent_trajectories`` asset
keeps them like every other stage's rows.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.errors import UserInputError
from ptfactory.storage.schema import MESSAGE, OUTCOME, STEP, from_records, validate_table

__all__ = ["complete_record", "read_trajectories", "trajectory_table", "write_trajectories"]


def _full(struct: pa.StructType, value: dict[str, Any]) -> dict[str, Any]:
    return {name: value.get(name) for name in struct.names}


def complete_record(row: dict[str, Any]) -> dict[str, Any]:
    """Every step, message and outcome field present (absent ones null), as Arrow wants them."""
    outcome = _full(OUTCOME, row["outcome"])
    outcome["initial_check"] = _full(STEP, outcome["initial_check"] or {})
    return {
        **row,
        "steps": [_full(STEP, s) for s in row["steps"]],
        "messages": [_full(MESSAGE, m) for m in row["messages"]],
        "outcome": outcome,
    }


def trajectory_table(rows: Sequence[dict[str, Any]]) -> tuple[pa.Table, int]:
    """A validated table of trajectory rows, and how many rows were left out as exact repeats:
    two rollouts that said and did the same are one sample (same ``sample_id``)."""
    seen: set[str] = set()
    unique = []
    for row in rows:
        if row["sample_id"] not in seen:
            seen.add(row["sample_id"])
            unique.append(complete_record(row))
    table = from_records(unique)
    validate_table(table)
    return table, len(rows) - len(unique)


def write_trajectories(rows: Sequence[dict[str, Any]], path: Path) -> int:
    """Write the rows (repeats once) to ``path`` atomically; returns the repeats left out."""
    table, repeats = trajectory_table(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return repeats


def read_trajectories(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UserInputError(f"{path}: no such trajectory file; write one with `ptf agent run`")
    table = pq.read_table(path)
    missing = [n for n in ("sample_id", "steps", "outcome") if n not in table.column_names]
    if missing:
        raise UserInputError(
            f"{path}: not a trajectory table (no column {missing[0]!r}); write one with `ptf agent run`"
        )
    rows: list[dict[str, Any]] = [r for r in table.to_pylist() if r["kind"] == "agent"]
    return rows
