"""A local SQLite file the factory keeps a log or a queue in (the label ledger, the review queue):
WAL, full sync, one connection per call, write transactions that hold the lock from their first
read (``BEGIN IMMEDIATE``), so a read-decide-write is atomic against other processes and threads."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["SqliteFile"]


class SqliteFile:
    def __init__(self, path: Path, ddl: str, timeout: float = 120.0) -> None:
        """Open (or create) ``path`` and run ``ddl`` (idempotent: ``CREATE ... IF NOT EXISTS``)."""
        self.path = path
        self.timeout = timeout
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(ddl)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A transaction holding the write lock from its first statement; rolled back on error."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()
