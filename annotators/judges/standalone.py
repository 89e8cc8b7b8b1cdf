"""Judging any table: rows of prompt and response text (or sample-schema ``messages``) scored by a
:class:`Panel`, outside any batch. ``ptf judge`` and the judge bench call :func:`score_table`, which
makes the table a batch of sample records and runs :meth:`Panel.judge_table` on it: the verifiers
first, the same weights, left-out judges and aggregate as the factory's judged batches.

Where the text is, in this order:

1. ``prompt_column`` / ``response_column`` when given (one given: the other is looked up in the
   names below);
2. a ``messages`` column (the sample schema: the first user turn is the prompt, a final
   assistant turn the response);
3. the first pair present of ``prompt``/``response``, ``instruction``/``output``,
   ``instruction``/``response``, ``question``/``answer``, ``query``/``response``,
   ``input``/``output``, ``prompt``/``completion``.

A row is a code row when the table's ``kind`` column says so, or, without one, when it has
tests (``tests``/``entry_point`` columns, or the columns named by ``tests_column``/
``entry_point_column``); a row with tests but no entry point takes the one function its tests
call, else the last function its reply defines that the asserts call (``Pair(...)`` and
``max_chain_length(...)``), else the one function its reply defines, else the last one its
prompt's stub defines; else, for tests that define ``check(candidate)``, it is an error naming
the flag (other tests call what they test: the row stays, its code verifier not applicable). A row with tests is always run: a ``scores.execution`` recorded
in the input table is never trusted for it. What the verifiers check against: ``reference_column``
(a reference answer: ``18``, or a worked solution ending ``#### 18``), a sample-schema
``reference`` struct, and the tests. Every row is taken as a model's output (judges are weighed
against the verifiers on all labelled rows) unless a sample-schema ``provenance`` says who wrote it.
Every row is judged (a ``decisions`` trail is not read). Bad input raises :class:`ColumnError` or
:class:`UserInputError` before any judge runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.judges.panel import Panel, PanelReport
from ptfactory.errors import UserInputError
from ptfactory.filters.execution.programs import code_blocks, infer_entry_point
from ptfactory.filters.verify import verifier_inputs
from ptfactory.generators.seed_tests import called_entry, called_function, needs_entry
from ptfactory.storage.schema import from_records, prompt_of, sample_id

__all__ = ["AGGREGATES", "PAIRS", "ColumnError", "Columns", "detect_columns", "judge_rows", "score_table"]

PAIRS = (
    ("prompt", "response"),
    ("instruction", "output"),
    ("instruction", "response"),
    ("question", "answer"),
    ("query", "response"),
    ("input", "output"),
    ("prompt", "completion"),
)
AGGREGATES = ("judge_mean", "judge_spread", "judge_confidence", "judge_votes")
BATCH = "ptf-judge"
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


def judge_rows(
    table: pa.Table,
    columns: Columns,
    *,
    reference_column: str | None = None,
    tests_column: str | None = None,
    entry_point_column: str | None = None,
) -> list[dict[str, Any]]:
    """The table's rows as sample records: ``sample_id``, ``batch``, ``kind``, ``messages``,
    ``scores``, ``tests``, ``entry_point``, ``reference``, ``provenance``, ``decisions`` (empty)."""
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
    checks = verifier_inputs(
        table,
        reference_column=reference_column,
        tests_column=tests_column,
        entry_point_column=entry_point_column,
    )

    def column(name: str) -> list[Any]:
        return table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows

    kinds, ids, scores, provenance = (column(c) for c in ("kind", "sample_id", "scores", "provenance"))
    rows = []
    for i, messages in enumerate(conversations):
        tests, entry = checks[i]["tests"], checks[i]["entry_point"]
        if tests and not entry and kinds[i] in (None, "code"):
            # tests given without the function they call: the code verifier needs it (the one
            # function the tests call, else the one the reply defines)
            reply = messages[-1]["content"]
            entry = (
                called_entry(tests)
                or called_function(tests, "\n".join(code_blocks(reply)) or reply)
                or infer_entry_point(prompt_of(messages), reply)
            )
            if entry is None and needs_entry(tests):  # check(candidate) needs the function to call
                raise UserInputError(
                    f"row {i} has tests but no entry point (the function its tests call), its tests "
                    "do not call exactly one function and its reply does not define exactly one; "
                    "pass --entry-point-column COLUMN "
                    "or give the table an `entry_point` column"
                )
        # tests that call what they test need no entry point: the row stays code (its verifier
        # says not_applicable) and the rest of the table is judged
        kind = kinds[i] or ("code" if tests else "sft")
        if kind not in ("sft", "code"):
            raise UserInputError(f"row {i} has kind {kind!r}; judges score sft and code rows")
        rows.append(
            {
                "sample_id": ids[i] or sample_id(kind, messages, tests=tests, entry_point=entry),
                "batch": BATCH,
                "kind": kind,
                "messages": messages,
                # a row with tests is run: a status recorded in the input table is never trusted
                "scores": None if tests else _execution_only(scores[i]),
                "tests": tests,
                "entry_point": entry,
                "reference": checks[i]["reference"],
                "provenance": provenance[i] if isinstance(provenance[i], dict) else None,
                "decisions": [],
            }
        )
    return rows


def _execution_only(scores: Any) -> dict[str, Any] | None:
    """What a table's own ``scores`` may tell the verifiers: a recorded execution (nothing of
    earlier judges)."""
    execution = scores.get("execution") if isinstance(scores, dict) else None
    return {"execution": execution} if execution else None


def score_table(
    table: pa.Table,
    panel: Panel,
    *,
    prompt_column: str | None = None,
    response_column: str | None = None,
    reference_column: str | None = None,
    tests_column: str | None = None,
    entry_point_column: str | None = None,
    progress: Progress | None = None,
) -> tuple[pa.Table, PanelReport]:
    """``table``'s columns plus ``judge_mean``, ``judge_spread``, ``judge_confidence``,
    ``judge_votes`` (independent counted votes: the two-vote rule), one float ``judge_<name>`` per
    verifier and judge (null where its vote did not count; a verifier votes 10 on a pass, 1 on a
    fail), one ``verdict_<name>`` per verifier (its verdict, null where it did not apply) and
    ``verifiers`` (each row's verdicts with their evidence, JSON); existing columns of those names
    are replaced. Also the panel's report on the table (the judges' weights on it)."""
    columns = detect_columns(table, prompt_column, response_column)
    rows = judge_rows(
        table,
        columns,
        reference_column=reference_column,
        tests_column=tests_column,
        entry_point_column=entry_point_column,
    )
    members = [*(panel.verifiers.names if panel.verifiers else []), *(j.name for j in panel.judges)]
    names = [f"judge_{m}" for m in members]
    verdict_names = [f"verdict_{m}" for m in (panel.verifiers.names if panel.verifiers else [])]
    clash = next((n for n in names if n in AGGREGATES), None)
    if clash or len(set(members)) != len(members):
        raise UserInputError(
            f"two panel members share the name {clash[6:] if clash else 'of another'}; rename one"
        )
    batch = from_records(rows)
    judged, report = panel.judge_table(batch, generated=_written(rows), progress=progress)
    scores = judged.column("scores").combine_chunks()
    values: dict[str, pa.Array] = {
        name: pc.struct_field(scores, name).cast(pa.float64() if name != "judge_votes" else pa.int32())
        for name in AGGREGATES
    }
    votes = pc.struct_field(scores, "judges").to_pylist()
    for member, name in zip(members, names, strict=True):
        mine = [next((v for v in row or [] if v["judge"] == member), None) for row in votes]
        values[name] = pa.array(
            [float(v["score"]) if v and v["parsed"] and v["score"] is not None else None for v in mine],
            pa.float64(),
        )
    verdicts = pc.struct_field(scores, "verifiers").to_pylist()
    for member, name in zip(panel.verifiers.names if panel.verifiers else [], verdict_names, strict=True):
        values[name] = pa.array(
            [next((v["verdict"] for v in row or [] if v["verifier"] == member), None) for row in verdicts],
            pa.string(),
        )
    if panel.verifiers:
        import json

        values["verifiers"] = pa.array(
            [
                json.dumps([{**v, "evidence": json.loads(v["evidence"] or "{}")} for v in row])
                if row
                else None
                for row in verdicts
            ],
            pa.string(),
        )
    out = table.drop_columns([n for n in values if n in table.column_names])
    for name, column in values.items():
        out = out.append_column(name, column)
    return out, report


def _written(rows: list[dict[str, Any]]) -> np.ndarray[Any, Any]:
    """Which rows a model wrote: all, unless a row's provenance says otherwise (no model named)."""
    return np.array(
        [r["provenance"] is None or bool((r["provenance"] or {}).get("model")) for r in rows], dtype=bool
    )
