"""Judging any table: rows of prompt and response text (or sample-schema ``messages``) scored by a
:class:`Panel`, outside any batch. ``ptf judge`` and the judge bench call :func:`score_table`.

Where the text is, in this order:

1. ``prompt_column`` / ``response_column`` when given (one given: the other is looked up in the
   names below);
2. a ``messages`` column (the sample schema: the first user turn is the prompt, a final
   assistant turn the response);
3. the first pair present of ``prompt``/``response``, ``instruction``/``output``,
   ``instruction``/``response``, ``question``/``answer``, ``query``/``response``,
   ``input``/``output``, ``prompt``/``completion``.

A row is a code row when the table's ``kind`` column says so, or, without one, when it has
non-null ``tests`` and ``entry_point``. The execution judge votes on code rows that carry
``scores.execution``; given a ``sandbox``, code rows without it are run first (solution, tests,
``check(entry_point)``), as the execution stage does. Every row is judged (a ``decisions`` trail
is not read). Bad input raises :class:`ColumnError` or :class:`UserInputError` before any judge runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ptfactory.annotators.judges.panel import Panel, aggregate
from ptfactory.errors import UserInputError
from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.programs import extract_solution, program
from ptfactory.storage.schema import prompt_of, response_of, sample_id

__all__ = ["PAIRS", "ColumnError", "Columns", "detect_columns", "judge_rows", "score_table"]

PAIRS = (
    ("prompt", "response"),
    ("instruction", "output"),
    ("instruction", "response"),
    ("question", "answer"),
    ("query", "response"),
    ("input", "output"),
    ("prompt", "completion"),
)
AGGREGATES = ("judge_mean", "judge_spread", "judge_confidence")
Progress = Callable[[int, int], None]


class ColumnError(UserInputError):
    """The table lacks the columns to judge; ``fix`` says how to name them (the CLI swaps in its flags)."""

    def __init__(self, problem: str, available: Sequence[str], fix: str) -> None:
        self.problem, self.available = problem, list(available)
        super().__init__(self.message(fix))

    def message(self, fix: str) -> str:
        return f"{self.problem}; its columns: {', '.join(self.available) or 'none'}; {fix}"


_FIX = "name them with prompt_column= and response_column="


@dataclass(frozen=True)
class Columns:
    """Where a table's text is: ``messages``, or a prompt and a response column."""

    messages: str | None = None
    prompt: str | None = None
    response: str | None = None

    def describe(self) -> str:
        return f"`{self.messages}`" if self.messages else f"`{self.prompt}` -> `{self.response}`"


def detect_columns(
    table: pa.Table, prompt_column: str | None = None, response_column: str | None = None
) -> Columns:
    """The columns to judge (see the module docstring for the order)."""
    names = table.column_names
    for given in (prompt_column, response_column):
        if given is not None and given not in names:
            raise ColumnError(f"the table has no column {given!r}", names, _FIX)
    if prompt_column and response_column:
        return Columns(prompt=prompt_column, response=response_column)
    if prompt_column or response_column:
        side = 1 if prompt_column else 0
        other = next(
            (p[side] for p in PAIRS if p[side] in names and p[side] not in (prompt_column, response_column)),
            None,
        )
        if other is None:
            wanted = "response" if prompt_column else "prompt"
            tried = "/".join(dict.fromkeys(p[side] for p in PAIRS))
            raise ColumnError(f"no {wanted} column found (tried {tried})", names, _FIX)
        return Columns(prompt=prompt_column or other, response=response_column or other)
    if "messages" in names:
        return Columns(messages="messages")
    for prompt, response in PAIRS:
        if prompt in names and response in names:
            return Columns(prompt=prompt, response=response)
    tried = ", ".join(["messages", *(f"{p}/{r}" for p, r in PAIRS)])
    raise ColumnError(f"no columns to judge found (tried {tried})", names, _FIX)


def _strings(table: pa.Table, name: str) -> list[str]:
    kind = table.schema.field(name).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise UserInputError(f"column {name!r} holds {kind}, not strings; judges read text")
    values = table.column(name).to_pylist()
    missing = next((i for i, v in enumerate(values) if v is None), None)
    if missing is not None:
        raise UserInputError(f"row {missing} of column {name!r} is null; every row needs text to judge")
    return values


def _conversations(table: pa.Table, name: str) -> list[list[dict[str, str]]]:
    out = []
    for i, messages in enumerate(table.column(name).to_pylist()):
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages
        ):
            raise UserInputError(
                f"row {i} of column {name!r} is not a list of {{role, content}} strings; "
                "use the sample schema or prompt/response columns"
            )
        if not prompt_of(messages) or not messages or messages[-1]["role"] != "assistant":
            raise UserInputError(f"row {i} of {name!r} needs a user turn and a final assistant turn to judge")
        out.append([{"role": m["role"], "content": m["content"]} for m in messages])
    return out


def judge_rows(table: pa.Table, columns: Columns) -> list[dict[str, Any]]:
    """The rows a judge reads: ``sample_id``, ``kind``, ``messages``, ``scores``, ``tests``, ``entry_point``."""
    if table.num_rows == 0:
        raise UserInputError("the table has no rows; nothing to judge")
    if columns.messages:
        conversations = _conversations(table, columns.messages)
    else:
        assert columns.prompt and columns.response
        prompts, responses = _strings(table, columns.prompt), _strings(table, columns.response)
        conversations = [
            [{"role": "user", "content": p}, {"role": "assistant", "content": r}]
            for p, r in zip(prompts, responses, strict=True)
        ]

    def column(name: str) -> list[Any]:
        return table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows

    tests, entries, kinds, ids, scores = (
        column(c) for c in ("tests", "entry_point", "kind", "sample_id", "scores")
    )
    rows = []
    for i, messages in enumerate(conversations):
        kind = kinds[i] or ("code" if tests[i] and entries[i] else "sft")
        if kind not in ("sft", "code"):
            raise UserInputError(f"row {i} has kind {kind!r}; judges score sft and code rows")
        rows.append(
            {
                "sample_id": ids[i] or sample_id(kind, messages, tests=tests[i], entry_point=entries[i]),
                "kind": kind,
                "messages": messages,
                "scores": scores[i] if isinstance(scores[i], dict) else None,
                "tests": tests[i],
                "entry_point": entries[i],
            }
        )
    return rows


def execute(rows: list[dict[str, Any]], sandbox: Sandbox, limits: Limits | None = None) -> int:
    """Run the code rows that have tests and no ``scores.execution`` yet; returns how many ran."""
    todo = [
        r
        for r in rows
        if r["kind"] == "code"
        and r["tests"]
        and r["entry_point"]
        and not (r["scores"] or {}).get("execution")
    ]
    jobs = []
    for row in todo:
        prompt, response = prompt_of(row["messages"]), response_of(row["messages"])
        solution = extract_solution(prompt, response, row["entry_point"])
        jobs.append(Job({"program.py": program(solution, row["tests"], row["entry_point"])}))
    for row, result in zip(todo, sandbox.run_many(jobs, limits), strict=True):
        row["scores"] = {**(row["scores"] or {}), "execution": result.score()}
    return len(todo)


def score_table(
    table: pa.Table,
    panel: Panel,
    *,
    prompt_column: str | None = None,
    response_column: str | None = None,
    sandbox: Sandbox | None = None,
    limits: Limits | None = None,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> pa.Table:
    """``table``'s columns plus ``judge_mean``, ``judge_spread``, ``judge_confidence`` and one float
    ``judge_<name>`` per judge (null where its vote did not count); existing columns of those
    names are replaced. ``progress(done, total)`` is called after each batch of rows."""
    columns = detect_columns(table, prompt_column, response_column)
    rows = judge_rows(table, columns)
    names = [f"judge_{j.name}" for j in panel.judges]
    clash = next((n for n in names if n in AGGREGATES), None)
    if clash:
        raise UserInputError(f"a judge named {clash[6:]!r} would overwrite {clash}; rename the judge")
    if sandbox is not None:
        execute(rows, sandbox, limits)
    values: dict[str, list[float | None]] = {n: [] for n in [*AGGREGATES, *names]}
    if progress:
        progress(0, len(rows))
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        for votes in panel.vote(chunk):
            agg = aggregate(votes)
            values["judge_mean"].append(agg.mean)
            values["judge_spread"].append(agg.spread)
            values["judge_confidence"].append(agg.confidence)
            for name, vote in zip(names, votes, strict=True):
                values[name].append(float(vote.score) if vote.counts and vote.score is not None else None)
        if progress:
            progress(start + len(chunk), len(rows))
    out = table.drop_columns([n for n in values if n in table.column_names])
    for name, column in values.items():
        out = out.append_column(pa.field(name, pa.float64()), pa.array(column, pa.float64()))
    return out
