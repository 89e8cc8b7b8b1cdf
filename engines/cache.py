"""The content-addressed response cache shared by every stage that calls an engine.

A request's key is the sha256 of (kind, engine identity, sampling params, messages) in
canonical JSON, where the identity is the model, backend, quantization and engine version
(:meth:`~ptfactory.engines.base.Engine.cache_identity`), so a new backend is never served another
backend's answers; its answer is stored as JSON in SQLite (WAL mode, so readers never block the writer
and several processes can share it). Engines write each finished chunk at once: after a
crash, a rerun finds everything that finished and sends only the rest.

What is stored is a key (a hash) and the answer, never the request. The requests themselves carry
no raw personal data or secret: seeds are redacted before they are staged, and the ``openai``
backend redacts every request before it is sent and before its key is made (``OpenAIEngine.redact``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["ResponseCache", "request_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""
_BATCH = 500  # SQLite's default limit on bound parameters is 999


def request_key(kind: str, model: str, params: dict[str, Any], request: Any) -> str:
    text = json.dumps(
        [kind, model, params, request], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as con:
            con.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a process crash
            self._local.con = con
        return con

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Any] = {}
        con = self._connect()
        for start in range(0, len(wanted), _BATCH):
            part = wanted[start : start + _BATCH]
            marks = ",".join("?" * len(part))
            for key, response in con.execute(
                f"SELECT key, response FROM responses WHERE key IN ({marks})", part
            ):
                found[key] = json.loads(response)
        return found

    def put_many(self, kind: str, model: str, answers: dict[str, Any]) -> None:
        if not answers:
            return
        now = time.time()
        con = self._connect()
        con.execute("BEGIN IMMEDIATE")
        try:
            con.executemany(
                "INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?)",
                [(k, kind, model, json.dumps(v, ensure_ascii=False), now) for k, v in answers.items()],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def __len__(self) -> int:
        row = self._connect().execute("SELECT count(*) FROM responses").fetchone()
        return int(row[0]) if row else 0

    def clear(self) -> None:
        self._connect().execute("DELETE FROM responses")
