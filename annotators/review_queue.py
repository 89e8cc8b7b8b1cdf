"""The review queue: every row that waits for an expert, in one store all batches share (SQLite, WAL).

Routing a batch (``routed_samples[batch]``) is an *admission*: in one transaction the batch's rows
that need a human join the queue, and the batch's review budget claims slots for the most uncertain
of them and of the rows other batches left waiting (:func:`~ptfactory.annotators.routing.route`
ranks them). The transaction takes SQLite's write lock before it reads the waiting rows, so two
batches routing at once never give one row two slots: the second waits for the first to commit,
then ranks what is left. No partition reads or rewrites another: a promoted row's new decision is
recorded here, on the row.

States: ``waiting`` (no slot yet), ``review`` (a slot: its own batch's, a later batch's, an audit,
or routed over budget after ``routing.max_wait_batches``), ``decided`` (an expert's label decides
it), ``settled`` (it waited too long and ``routing.silent`` accepted or rejected it). The one
pusher (:func:`~ptfactory.annotators.labelstudio.sync.push_queue`) delivers ``review`` rows to Label
Studio; curation moves rows to ``decided`` and back when a label is deleted: review drains.

Each row keeps its whole record, its trail as the queue last changed it, and the sequence number
of that change; each admission has one too. Curation reads what changed since its cursor
(:meth:`ReviewQueue.changes`), never the routed history.

A rerun of a batch's routing keeps what its first admission decided (the same rows get the same
decisions; a row already in the queue keeps its state); only rows new to the batch are routed, with
what is left of its budgets. A row whose sample_id is already queued from another batch is the same
sample: it is dropped here (``already_queued``) and decided through that copy.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.labelstudio.tasks import queue_of
from ptfactory.annotators.routing import STAGE, Decision, RoutingConfig, route
from ptfactory.storage.schema import AUDIT_REASON, add_decision, conform, from_records, live_rows
from ptfactory.storage.sqlite import SqliteFile

__all__ = ["ALREADY_QUEUED", "Admission", "Changes", "Pending", "ReviewQueue"]

ALREADY_QUEUED = "already_queued"
_CHUNK = 500  # ids per IN (...) list

_DDL = """
CREATE TABLE IF NOT EXISTS rows (
    sample_id TEXT NOT NULL PRIMARY KEY, batch TEXT NOT NULL, queue TEXT NOT NULL,
    state TEXT NOT NULL, slot TEXT, changed INTEGER NOT NULL, record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS rows_state ON rows (state);
CREATE INDEX IF NOT EXISTS rows_changed ON rows (changed);
CREATE TABLE IF NOT EXISTS admissions (
    batch TEXT PRIMARY KEY, first INTEGER NOT NULL, seq INTEGER NOT NULL, claimed INTEGER NOT NULL,
    audits INTEGER NOT NULL, promoted INTEGER NOT NULL, counts TEXT NOT NULL, decisions TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counter (
    id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, store TEXT NOT NULL
);
INSERT OR IGNORE INTO counter VALUES (1, 0, lower(hex(randomblob(8))));
"""


@dataclass(frozen=True)
class Admission:
    table: pa.Table  # the batch's rows, each live one with its routing decision
    counts: Counter[str]  # the batch's routing decisions, by reason (other batches' rows included)
    promoted: int  # other batches' waiting rows this batch's budget gave a slot
    seq: int


@dataclass
class _Known:
    """What a batch's earlier admissions decided: a rerun keeps it and adds to it."""

    first: int
    claimed: int = 0  # review slots its budget gave (its own rows and promoted ones)
    audits: int = 0
    promoted: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    decisions: dict[str, Decision] = field(default_factory=dict)  # its rows' routing, by sample_id

    @property
    def fresh(self) -> bool:
        """Never routed (a batch held back at its budget routed nothing either)."""
        return not self.decisions and not self.claimed and not self.audits

    @staticmethod
    def read(db: sqlite3.Connection, batch: str, seq: int) -> _Known:
        row = db.execute(
            "SELECT first, claimed, audits, promoted, counts, decisions FROM admissions WHERE batch = ?",
            (batch,),
        ).fetchone()
        if row is None:
            return _Known(seq)
        decisions = {k: (v[0], v[1], v[2]) for k, v in json.loads(row[5]).items()}
        return _Known(
            int(row[0]), int(row[1]), int(row[2]), int(row[3]), Counter(json.loads(row[4])), decisions
        )

    def write(self, db: sqlite3.Connection, batch: str, seq: int) -> None:
        db.execute(
            "INSERT OR REPLACE INTO admissions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                batch,
                self.first,
                seq,
                self.claimed,
                self.audits,
                self.promoted,
                json.dumps(dict(self.counts)),
                json.dumps(self.decisions),
            ),
        )


@dataclass(frozen=True)
class Pending:
    """A row holding a review slot: what the pusher needs to know before it reads the record."""

    sample_id: str
    batch: str  # the batch it came from (its config says where its task goes)
    slot: str  # the batch whose budget gave it the slot
    queue: str  # its Label Studio queue (kind, or <kind>-audit)


@dataclass(frozen=True)
class Changes:
    seq: int  # the queue's sequence now: the next cursor
    batches: list[str]  # batches admitted since the cursor (their routed output changed)
    rows: pa.Table  # queue rows changed since the cursor, as the queue holds them


class ReviewQueue(SqliteFile):
    def __init__(self, path: Path, hook: Callable[[str], None] | None = None) -> None:
        """``hook("read")`` runs inside an admission's transaction after it read the waiting rows
        and before it writes its claims (tests interleave concurrent admissions with it)."""
        super().__init__(path, _DDL)
        self.hook = hook

    # -- routing appends ------------------------------------------------------------------------
    def admit(self, batch: str, table: pa.Table, config: RoutingConfig) -> Admission:
        """Route ``batch``'s judged rows and claim its review slots, atomically (the module doc)."""
        table = conform(table)
        others = set(table.column("batch").to_pylist()) - {batch}
        if others:
            raise ValueError(f"admitting batch {batch!r}: rows of batch(es) {sorted(map(str, others))} given")
        with self._write() as db:
            seq = int(db.execute("UPDATE counter SET seq = seq + 1 RETURNING seq").fetchone()[0])
            known = _Known.read(db, batch, seq)
            table, doubles = _mark_queued_elsewhere(table, _queued_elsewhere(db, table, batch))
            if (
                known.fresh
            ):  # first routed here (or held back at its budget): it competes with the waiting rows
                order = [b for (b,) in db.execute("SELECT batch FROM admissions ORDER BY first")]
                waiting = _records(
                    db.execute("SELECT record FROM rows WHERE state = 'waiting' AND batch != ?", (batch,))
                )
                if self.hook:
                    self.hook("read")
                routed, counts = route(table, config, batch=batch, waiting=waiting, order=order)
            else:
                if self.hook:
                    self.hook("read")
                routed, counts = _rerun(table, known.decisions, config, batch, (known.claimed, known.audits))
            mine = routed.filter(pc.equal(routed.column("batch"), batch).fill_null(False))
            carried = routed.filter(pc.not_equal(routed.column("batch"), batch).fill_null(True))
            new = {sid: d for sid, d in _decisions(mine).items() if sid not in known.decisions}
            _insert(db, mine, set(new), batch, seq)
            promoted = _carry(db, carried, batch, seq)
            known.claimed += promoted + sum(1 for d in new.values() if d[:2] == ("route", "needs_review"))
            known.audits += sum(1 for d in new.values() if d[1] == AUDIT_REASON)
            known.promoted += promoted
            known.counts += counts + Counter({ALREADY_QUEUED: doubles} if doubles else {})
            known.decisions.update(new)
            known.write(db, batch, seq)
        return Admission(mine, known.counts, known.promoted, seq)

    # -- the pusher and curation read ------------------------------------------------------------
    def pending(self, slots: Iterable[str] | None = None) -> list[Pending]:
        """Rows holding a review slot (of the batches ``slots``, default every batch)."""
        with self._connect() as db:
            found = db.execute("SELECT sample_id, batch, slot, queue FROM rows WHERE state = 'review'")
            rows = [Pending(str(s), str(b), str(t), str(q)) for s, b, t, q in found]
        wanted = set(slots) if slots is not None else None
        return [r for r in rows if wanted is None or r.slot in wanted]

    def records(self, ids: Iterable[str]) -> pa.Table:
        """The queue's record of each of ``ids`` that it holds."""
        ids = list(ids)
        with self._connect() as db:
            found: list[str] = []
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                found += [
                    r for (r,) in db.execute(f"SELECT record FROM rows WHERE sample_id IN ({marks})", chunk)
                ]
        return _records((r,) for r in found)

    def position(self) -> tuple[str, int]:
        """(this store's identity, its sequence now): a cursor into another store is no cursor here."""
        with self._connect() as db:
            store, seq = db.execute("SELECT store, seq FROM counter").fetchone()
            return str(store), int(seq)

    def changes(self, since: int) -> Changes:
        """What changed after sequence ``since``: admitted batches and queue rows."""
        with self._connect() as db:
            now = int(db.execute("SELECT seq FROM counter").fetchone()[0])
            batches = [
                b for (b,) in db.execute("SELECT batch FROM admissions WHERE seq > ? ORDER BY seq", (since,))
            ]
            rows = _records(
                db.execute("SELECT record FROM rows WHERE changed > ? ORDER BY changed", (since,))
            )
        return Changes(now, batches, rows)

    def admitted(self) -> list[str]:
        """Every batch ever admitted, oldest first."""
        with self._connect() as db:
            return [b for (b,) in db.execute("SELECT batch FROM admissions ORDER BY first")]

    def counts(self) -> Counter[str]:
        """Rows per state."""
        with self._connect() as db:
            return Counter(
                {str(s): int(n) for s, n in db.execute("SELECT state, count(*) FROM rows GROUP BY state")}
            )

    # -- curation drains -------------------------------------------------------------------------
    def mark(self, decided: Iterable[str], undecided: Iterable[str]) -> None:
        """Rows an expert's label now decides leave ``review``; rows whose label was taken back return."""
        with self._write() as db:
            for state, was, ids in (
                ("decided", "review", list(decided)),
                ("review", "decided", list(undecided)),
            ):
                for start in range(0, len(ids), _CHUNK):
                    chunk = ids[start : start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    db.execute(
                        f"UPDATE rows SET state = ? WHERE state = ? AND sample_id IN ({marks})",
                        [state, was, *chunk],
                    )


def _records(cursor: Iterable[tuple[str]]) -> pa.Table:
    return from_records([json.loads(record) for (record,) in cursor])


def _queued_elsewhere(db: sqlite3.Connection, table: pa.Table, batch: str) -> dict[str, tuple[str, str]]:
    """sample_id -> (batch, state) of this table's ids the queue holds from other batches."""
    ids = table.column("sample_id").to_pylist()
    out: dict[str, tuple[str, str]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        query = f"SELECT sample_id, batch, state FROM rows WHERE batch != ? AND sample_id IN ({marks})"
        for sid, other, state in db.execute(query, [batch, *chunk]):
            out[str(sid)] = (str(other), str(state))
    return out


def _mark_queued_elsewhere(table: pa.Table, elsewhere: dict[str, tuple[str, str]]) -> tuple[pa.Table, int]:
    """Live rows whose sample is queued from another batch, dropped as ``already_queued``; how many."""
    if not elsewhere:
        return table, 0
    ids = table.column("sample_id").to_pylist()
    rows = [i for i in live_rows(table) if ids[i] in elsewhere]
    details = [
        f"the same sample from batch {elsewhere[ids[i]][0]} is in the review queue ({elsewhere[ids[i]][1]})"
        for i in rows
    ]
    marked = add_decision(
        table, STAGE, ["drop"] * len(rows), [ALREADY_QUEUED] * len(rows), details, rows=rows
    )
    return marked, len(rows)


def _decisions(table: pa.Table) -> dict[str, Decision]:
    """The routing decision of each row routing decided (its last ``route`` decision): the live
    rows, and those routing itself rejected (an auto-reject is a decision a rerun keeps too; a
    rerun that re-routed it found no decision for it and failed)."""
    out: dict[str, Decision] = {}
    trails = table.column("decisions").to_pylist()
    ids = table.column("sample_id").to_pylist()
    live = set(live_rows(table))
    for i, trail in enumerate(trails):
        last = next((d for d in reversed(trail or []) if d["stage"] == STAGE), None)
        if last is not None and (i in live or last["verdict"] == "reject"):
            out[ids[i]] = (last["verdict"], last["reason"], last["detail"])
    return out


def _rerun(
    table: pa.Table, prior: dict[str, Decision], config: RoutingConfig, batch: str, used: tuple[int, int]
) -> tuple[pa.Table, Counter[str]]:
    """A batch routed again: its rows keep the decisions of its first admission; rows new to it are
    routed with what is left of its budgets (against each other only: the waiting rows of other
    batches already competed for this batch's budget)."""
    claimed, audits = used
    ids = table.column("sample_id").to_pylist()
    live = live_rows(table)
    new = [i for i in live if ids[i] not in prior]
    decided: dict[int, Decision] = {i: prior[ids[i]] for i in live if ids[i] in prior}
    counts: Counter[str] = Counter()
    if new:
        left = config.model_copy(
            update={
                "review_budget": max(0, config.review_budget - claimed),
                "audit_budget": max(0, config.audit_budget - audits),
            }
        )
        routed, counts = route(table.take(pa.array(new, pa.int64())), left, batch=batch)
        by_id = _decisions(routed)
        decided.update({i: by_id[ids[i]] for i in new})
    rows = sorted(decided)
    marked = add_decision(
        table,
        STAGE,
        [decided[i][0] for i in rows],
        [decided[i][1] for i in rows],
        [decided[i][2] for i in rows],
        rows=rows,
    )
    return marked, counts


def _insert(db: sqlite3.Connection, mine: pa.Table, new: set[str], batch: str, seq: int) -> None:
    """The batch's rows that need a human join the queue (rows already in it keep their state)."""
    wanted = []
    for row in mine.to_pylist():
        if row["sample_id"] not in new:
            continue
        last = row["decisions"][-1]
        if last["stage"] != STAGE or last["verdict"] not in ("route", "wait"):
            continue
        state, slot = ("review", batch) if last["verdict"] == "route" else ("waiting", None)
        wanted.append((row["sample_id"], batch, queue_of(row), state, slot, seq, _dump(row)))
    db.executemany("INSERT OR IGNORE INTO rows VALUES (?, ?, ?, ?, ?, ?, ?)", wanted)


def _carry(db: sqlite3.Connection, carried: pa.Table, batch: str, seq: int) -> int:
    """Record what this admission decided for other batches' waiting rows; returns how many it
    promoted into a review slot of its budget."""
    promoted = 0
    for row in carried.to_pylist():
        verdict, reason = row["decisions"][-1]["verdict"], row["decisions"][-1]["reason"]
        state = "review" if verdict == "route" else "settled"
        cursor = db.execute(
            "UPDATE rows SET state = ?, slot = ?, changed = ?, record = ? WHERE sample_id = ? AND state = 'waiting'",
            (state, batch if state == "review" else None, seq, _dump(row), row["sample_id"]),
        )
        if cursor.rowcount != 1:  # the write lock was held since the read: this cannot happen
            raise RuntimeError(
                f"review queue: {row['sample_id']} was not waiting when batch {batch} claimed it"
            )
        promoted += reason == "needs_review"
    return promoted


def _dump(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))
