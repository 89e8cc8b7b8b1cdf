"""The local record of what went to Label Studio and what came back (SQLite, WAL).

- ``pushed``: one row per (project, sample_id): makes a second push of a batch add nothing.
- ``events``: the append-only log of annotations seen: created, updated (supersedes), deleted.
  A unique key on (annotation, event, updated_at) makes a re-pulled page add nothing.
- ``watermarks``: per project, the newest task ``updated_at`` whose annotations are in the log,
  written in the same transaction as those events, so a pull that dies halfway resumes exactly.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ptfactory.storage.sqlite import SqliteFile

__all__ = ["EVENT_SCHEMA", "Event", "Ledger"]

_DDL = """
CREATE TABLE IF NOT EXISTS pushed (
    project_id INTEGER NOT NULL, sample_id TEXT NOT NULL, task_id INTEGER NOT NULL,
    queue TEXT NOT NULL, batch TEXT, pushed_at REAL NOT NULL,
    PRIMARY KEY (project_id, sample_id)
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event TEXT NOT NULL, annotation_id INTEGER NOT NULL, task_id INTEGER NOT NULL,
    project_id INTEGER NOT NULL, queue TEXT, sample_id TEXT, annotator TEXT,
    result TEXT, was_cancelled INTEGER NOT NULL DEFAULT 0,
    created_at TEXT, updated_at TEXT, lead_time_s REAL, pulled_at REAL NOT NULL,
    UNIQUE (annotation_id, event, updated_at)
);
CREATE TABLE IF NOT EXISTS watermarks (project_id INTEGER PRIMARY KEY, updated_at TEXT NOT NULL);
"""

EVENT_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("event", pa.string()),
        ("annotation_id", pa.int64()),
        ("task_id", pa.int64()),
        ("project_id", pa.int64()),
        ("queue", pa.string()),
        ("sample_id", pa.string()),
        ("annotator", pa.string()),
        ("result", pa.string()),
        ("was_cancelled", pa.bool_()),
        ("created_at", pa.string()),
        ("updated_at", pa.string()),
        ("lead_time_s", pa.float64()),
        ("pulled_at", pa.float64()),
    ]
)


@dataclass(frozen=True)
class Event:
    event: str  # created | updated | deleted
    annotation_id: int
    task_id: int
    project_id: int
    queue: str
    sample_id: str | None
    annotator: str | None
    result: list[dict[str, Any]] | None
    was_cancelled: bool
    created_at: str | None
    updated_at: str | None
    lead_time_s: float | None


class Ledger(SqliteFile):
    def __init__(self, path: Path) -> None:
        super().__init__(path, _DDL, timeout=60.0)

    # push ----------------------------------------------------------------------------------
    def pushed_ids(self, project_id: int) -> set[str]:
        with self._connect() as db:
            rows = db.execute("SELECT sample_id FROM pushed WHERE project_id = ?", (project_id,))
            return {row[0] for row in rows}

    def pushed_count(self, project_id: int) -> int:
        with self._connect() as db:
            row = db.execute("SELECT count(*) FROM pushed WHERE project_id = ?", (project_id,)).fetchone()
            return int(row[0])

    def record_push(self, project_id: int, queue: str, items: Iterable[tuple[str, int, str | None]]) -> None:
        """``items``: (sample_id, task_id, batch)."""
        now = time.time()
        with self._write() as db:
            db.executemany(
                "INSERT OR IGNORE INTO pushed VALUES (?, ?, ?, ?, ?, ?)",
                [(project_id, sid, task, queue, batch, now) for sid, task, batch in items],
            )

    # pull ----------------------------------------------------------------------------------
    def watermark(self, project_id: int) -> str | None:
        with self._connect() as db:
            row = db.execute(
                "SELECT updated_at FROM watermarks WHERE project_id = ?", (project_id,)
            ).fetchone()
            return None if row is None else str(row[0])

    def live_annotations(self, task_ids: Iterable[int]) -> dict[int, dict[int, str | None]]:
        """task id → {annotation id → updated_at} of annotations whose last event is not a deletion."""
        ids = list(task_ids)
        out: dict[int, dict[int, str | None]] = {t: {} for t in ids}
        if not ids:
            return out
        with self._connect() as db:
            marks = ",".join("?" * len(ids))
            rows = db.execute(
                f"""SELECT task_id, annotation_id, event, updated_at FROM events
                    WHERE seq IN (SELECT max(seq) FROM events WHERE task_id IN ({marks})
                                  GROUP BY annotation_id)""",
                ids,
            )
            for task_id, annotation_id, event, updated_at in rows:
                if event != "deleted":
                    out[int(task_id)][int(annotation_id)] = updated_at
        return out

    def commit_page(self, project_id: int, events: list[Event], watermark: str | None) -> Counter[str]:
        """Append ``events`` and move the watermark, all or nothing; counts the events added by kind
        (an event already in the log is not added twice)."""
        now = time.time()
        added: Counter[str] = Counter()
        with self._write() as db:
            for e in events:
                cursor = db.execute(
                    "INSERT OR IGNORE INTO events (event, annotation_id, task_id, project_id, queue, sample_id,"
                    " annotator, result, was_cancelled, created_at, updated_at, lead_time_s, pulled_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        e.event,
                        e.annotation_id,
                        e.task_id,
                        e.project_id,
                        e.queue,
                        e.sample_id,
                        e.annotator,
                        json.dumps(e.result, ensure_ascii=False) if e.result is not None else None,
                        int(e.was_cancelled),
                        e.created_at,
                        e.updated_at,
                        e.lead_time_s,
                        now,
                    ),
                )
                added[e.event] += cursor.rowcount
            if watermark is not None:
                db.execute(
                    "INSERT INTO watermarks VALUES (?, ?) ON CONFLICT (project_id) DO UPDATE"
                    " SET updated_at = max(updated_at, excluded.updated_at)",
                    (project_id, watermark),
                )
        return added

    def last_seq(self) -> int:
        with self._connect() as db:
            row = db.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
            return int(row[0])

    def labelled_since(self, seq: int) -> set[str]:
        """Samples with an event after ``seq`` (what a curation with that cursor must look at again)."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT DISTINCT sample_id FROM events WHERE seq > ? AND sample_id IS NOT NULL", (seq,)
            )
            return {str(row[0]) for row in rows}

    def events(self, sample_ids: Iterable[str] | None = None) -> pa.Table:
        """The log in order: every event, or those of ``sample_ids``."""
        names = ", ".join(EVENT_SCHEMA.names)
        with self._connect() as db:
            if sample_ids is None:
                rows = db.execute(f"SELECT {names} FROM events ORDER BY seq").fetchall()
            else:
                ids, rows = list(sample_ids), []
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    query = f"SELECT {names} FROM events WHERE sample_id IN ({marks}) ORDER BY seq"
                    rows += db.execute(query, chunk).fetchall()
                rows.sort(key=lambda row: row[0])
        columns: list[Any] = list(zip(*rows, strict=True)) if rows else [() for _ in EVENT_SCHEMA.names]
        arrays = []
        for field, values in zip(EVENT_SCHEMA, columns, strict=True):
            cells = [bool(v) for v in values] if field.name == "was_cancelled" else list(values)
            arrays.append(pa.array(cells, field.type))
        return pa.Table.from_arrays(arrays, schema=EVENT_SCHEMA)
