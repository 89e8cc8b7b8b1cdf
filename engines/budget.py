"""Spending budgets: what one run, and one batch over all its runs, may spend on engine tokens.

``budget`` in factory.yaml (:class:`BudgetConfig`) sets the limits; ``ptf run --budget
tokens=N,usd=X`` overrides them for one run (:func:`parse_budget_option`; the override travels to
the assets as the run tag ``ptf/budget``, so ``ptf ui`` launches can set it too).

Spending is what the engines count for each chunk they send (prompt and completion tokens, the
prompts of scored requests included), priced at the engine's ``price_per_mtok``. A cache hit
sends nothing and costs nothing. Every chunk's cost goes to the :class:`BudgetLedger` (SQLite in
the state dir), which every step of a run shares whatever the executor, and which keeps every
earlier run's spending for the per-batch limits.

Before an engine sends a chunk it asks its stage's :class:`BudgetGuard`. Once a limit is reached
the guard raises :class:`BudgetExhausted`: that chunk and every later one stay unsent. Every
finished chunk is already in the response cache, so nothing finished is lost. The stage records
the rows it could not finish as ``budget_exhausted`` (``assets/budget.py``). A rerun with a larger
budget gets the finished requests from the cache (none is sent again) and sends the rest.

A chunk in flight when a limit is reached finishes and is kept, so spending can pass a limit by
at most one chunk (``engines.*.chunk_size`` requests: lower it for a tighter stop).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from ptfactory.errors import ConfigError, FactoryError
from ptfactory.section import Section

if TYPE_CHECKING:
    from ptfactory.engines.base import Engine

__all__ = [
    "BUDGET_TAG",
    "LEDGER_FILE",
    "BudgetConfig",
    "BudgetExhausted",
    "BudgetGuard",
    "BudgetLedger",
    "Spend",
    "effective_budget",
    "estimate_tokens",
    "parse_budget_option",
]

BUDGET_TAG = "ptf/budget"  # run tag: the JSON of the limits `ptf run --budget` set for that run
LEDGER_FILE = "budget.sqlite"  # in the state dir (PTF_HOME when local)
LIMITS = ("tokens", "usd", "batch_tokens", "batch_usd")


class BudgetConfig(Section):
    """The ``budget`` section of factory.yaml. Unset limits do not apply; spending is always recorded."""

    tokens: int | None = Field(
        None,
        ge=0,
        description="tokens (prompt + completion, as the engines count them) one run may spend; "
        "cache hits are free; 0: answer only from the cache; unset: no limit",
    )
    usd: float | None = Field(
        None, ge=0, description="dollars one run may spend: each engine's tokens at its price_per_mtok"
    )
    batch_tokens: int | None = Field(
        None, ge=0, description="tokens one batch may spend over all its runs (reruns included)"
    )
    batch_usd: float | None = Field(None, ge=0, description="dollars one batch may spend over all its runs")
    publish_partial: bool = Field(
        False,
        description="a batch stopped at its budget publishes the rows that finished every stage (true), "
        "or nothing of that batch until a rerun finishes it (false)",
    )

    def limits(self) -> dict[str, float]:
        return {k: float(v) for k in LIMITS if (v := getattr(self, k)) is not None}


class BudgetExhausted(FactoryError):
    """An engine was about to send a chunk past a budget (or, replaying, a request not in the cache).

    Not an :class:`~ptfactory.errors.EngineError`: code that survives a failed request must not
    swallow it; the stage's asset catches it."""


_OPTION_HELP = "e.g. --budget tokens=200000 or --budget usd=0.5,publish_partial=true"


def parse_budget_option(values: list[str]) -> dict[str, Any]:
    """``--budget`` values (``key=value``, comma-separated or repeated) as section overrides.

    A bad key or value is a ConfigError naming it and the fix."""
    given: dict[str, Any] = {}
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            key, sep, raw = part.partition("=")
            key = key.strip()
            if not sep or key not in BudgetConfig.model_fields:
                allowed = ", ".join(BudgetConfig.model_fields)
                shown = f"unknown key {key!r}" if sep else f"{part!r} is not key=value"
                raise ConfigError(f"--budget: {shown}; allowed: {allowed} ({_OPTION_HELP})")
            given[key] = _option_value(key, raw.strip())
    try:
        BudgetConfig.model_validate(given)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = str(error["loc"][0])
        raise ConfigError(f"--budget: '{key}' is {given[key]!r}: {error['msg']} ({_OPTION_HELP})") from None
    return given


def _option_value(key: str, raw: str) -> Any:
    try:
        if key == "publish_partial":
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.lower() == "true"
        number = float(raw.replace("_", "")) if key.endswith("usd") else int(raw.replace("_", ""))
    except ValueError:
        kind = {"publish_partial": "true or false", "usd": "a number of dollars"}.get(
            key.removeprefix("batch_"), "a whole number of tokens"
        )
        raise ConfigError(f"--budget: '{key}' is {raw!r}; give {kind} ({_OPTION_HELP})") from None
    return number


def effective_budget(config: BudgetConfig, tag: str | None) -> BudgetConfig:
    """factory.yaml's budget with a run's ``ptf/budget`` tag (``ptf run --budget``) on top."""
    if not tag:
        return config
    try:
        overrides = json.loads(tag)
    except json.JSONDecodeError:
        raise ConfigError(
            f"run tag {BUDGET_TAG} is {tag!r}, not JSON; set it with ptf run --budget"
        ) from None
    try:
        return BudgetConfig.model_validate({**config.model_dump(), **overrides})
    except ValidationError as exc:
        raise ConfigError(f"run tag {BUDGET_TAG}: {exc.errors()[0]['msg']} ({tag})") from None


@dataclass
class Spend:
    tokens: int = 0
    usd: float = 0.0

    def __iadd__(self, other: Spend) -> Spend:
        self.tokens += other.tokens
        self.usd += other.usd
        return self


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS spend (run_id TEXT, batch TEXT, asset TEXT, engine TEXT, "
    "tokens INTEGER, usd REAL, at REAL)",
    # running sums per run and per batch: an engine asks before every chunk, in O(1)
    "CREATE TABLE IF NOT EXISTS totals (scope TEXT, key TEXT, tokens INTEGER, usd REAL, "
    "PRIMARY KEY (scope, key))",
    "CREATE TABLE IF NOT EXISTS stops (run_id TEXT, batch TEXT, asset TEXT, reason TEXT, at REAL)",
)


class BudgetLedger:
    """What each (run, batch, asset, engine) spent, chunk by chunk, in SQLite (WAL: the steps of a
    run in other processes add to and read the same sums), and where runs stopped at a budget."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        con = self._connect()
        for statement in _SCHEMA:
            con.execute(statement)

    def _connect(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            self._local.con = con
        return con

    def charge(self, run_id: str, batch: str, asset: str, engine: str, spend: Spend) -> None:
        con = self._connect()
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute(
                "INSERT INTO spend VALUES (?,?,?,?,?,?,?)",
                (run_id, batch, asset, engine, spend.tokens, spend.usd, time.time()),
            )
            con.executemany(
                "INSERT INTO totals VALUES (?,?,?,?) ON CONFLICT (scope, key) DO UPDATE SET "
                "tokens = tokens + excluded.tokens, usd = usd + excluded.usd",
                [("run", run_id, spend.tokens, spend.usd), ("batch", batch, spend.tokens, spend.usd)],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def spent(self, *, run_id: str | None = None, batch: str | None = None) -> Spend:
        """What one run (``run_id``) or one batch over all its runs (``batch``) has spent."""
        scope, key = ("run", run_id) if run_id is not None else ("batch", batch)
        row = (
            self._connect()
            .execute("SELECT tokens, usd FROM totals WHERE scope = ? AND key = ?", (scope, key))
            .fetchone()
        )
        return Spend(int(row[0]), float(row[1])) if row else Spend()

    def stop(self, run_id: str, batch: str, asset: str, reason: str) -> None:
        self._connect().execute(
            "INSERT INTO stops VALUES (?,?,?,?,?)", (run_id, batch, asset, reason, time.time())
        )

    def stops(self, run_id: str, batch: str | None = None) -> list[tuple[str, str]]:
        """(asset, reason) of every stage of the run that stopped at a budget, in order; with
        ``batch``, only on that batch (a run over several partitions holds back only the batches
        that stopped)."""
        rows = self._connect().execute(
            "SELECT asset, reason FROM stops WHERE run_id = ? AND (? IS NULL OR batch = ?) ORDER BY at",
            (run_id, batch, batch),
        )
        return [(str(a), str(r)) for a, r in rows]


@dataclass
class BudgetGuard:
    """One stage (asset) of one run: engines ask it before each chunk (:meth:`admit`) and tell it
    what the chunk cost (:meth:`charge`). ``replay``: send nothing at all, answer only from the
    cache (how a stage finds which of its rows finished before the stop)."""

    budget: BudgetConfig
    ledger: BudgetLedger
    run_id: str
    batch: str
    asset: str
    replay: bool = False
    spent: Spend = field(default_factory=Spend)  # by this stage, this run
    stopped: str | None = None  # the limit that stopped this stage

    def reached(self) -> str | None:
        """The first limit the run (or the batch) has reached, as a phrase; None while all have room."""
        limits = self.budget.limits()
        if not limits:
            return None
        run = self.ledger.spent(run_id=self.run_id)
        batch = self.ledger.spent(batch=self.batch) if {"batch_tokens", "batch_usd"} & set(limits) else run
        for key, value in limits.items():
            spent = batch if key.startswith("batch_") else run
            used = spent.usd if key.endswith("usd") else spent.tokens
            if used >= value:
                return f"{key} {used:,.6g} of {value:,.6g}"
        return None

    def admit(self, engine: Engine, requests: int) -> None:
        if self.replay:
            raise BudgetExhausted(f"{requests} requests of {engine.model_id} are not in the cache")
        reason = self.reached()
        if reason is None:
            return
        if self.stopped is None:
            self.stopped = reason
            self.ledger.stop(self.run_id, self.batch, self.asset, reason)
        raise BudgetExhausted(f"{self.asset} stopped at the budget: {reason}")

    def charge(self, engine: Engine, tokens: int, price_per_mtok: float) -> None:
        spend = Spend(tokens, tokens * price_per_mtok / 1e6)
        self.spent += spend
        self.ledger.charge(self.run_id, self.batch, self.asset, engine.model_id, spend)

    def meter(self, price_per_mtok: float) -> Meter:
        return Meter(self, price_per_mtok)


@dataclass
class Meter:
    """What an engine holds as ``Engine.budget``: its stage's guard and its own price."""

    guard: BudgetGuard
    price_per_mtok: float

    def admit(self, engine: Engine, requests: int) -> None:
        self.guard.admit(engine, requests)

    def charge(self, engine: Engine, tokens: int) -> None:
        if tokens:
            self.guard.charge(engine, tokens, self.price_per_mtok)


CHARS_PER_TOKEN = 4  # English text in the BPE vocabularies of the bundled models: about 4 characters
MESSAGE_TOKENS = 4  # what a chat template adds around each message (role markers, separators)


def estimate_tokens(prompt: Any) -> int:
    """Tokens a prompt (a conversation, or a plain string) is about, without a tokenizer: for a
    dry run, and for backends that cannot count the prompts of scored requests."""
    if isinstance(prompt, str):
        return -(-len(prompt) // CHARS_PER_TOKEN)
    return sum(MESSAGE_TOKENS + -(-len(str(m.get("content") or "")) // CHARS_PER_TOKEN) for m in prompt)
