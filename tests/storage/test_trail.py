"""The trail helpers work on Arrow columns; they give exactly what the row-by-row versions gave
(the oracle below is the code they replaced), on random batches with empty, null and chunked
trails and scores."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from ptfactory.errors import SchemaError
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.schema.record import DECISION, SCORES
from ptfactory.storage.schema.trail import add_decision, dropped_mask, live_rows, set_score

VERDICTS = ["keep", "drop", "reject", "accept", "route", "wait"]


def _oracle_add(
    table: pa.Table,
    stage: str,
    verdicts: list[str],
    reasons: list[str],
    details: list[Any],
    *,
    rows: list[int],
) -> list[Any]:
    trail = table.column("decisions").to_pylist()
    for row, verdict, reason, detail in zip(rows, verdicts, reasons, details, strict=True):
        trail[row] = [
            *(trail[row] or []),
            {"stage": stage, "verdict": verdict, "reason": reason, "detail": detail},
        ]
    return trail


def _oracle_score(table: pa.Table, name: str, values: list[Any]) -> list[Any]:
    scores = table.column("scores").to_pylist()
    merged = [{**(old or {}), name: value} for old, value in zip(scores, values, strict=True)]
    return pa.array(merged, SCORES).to_pylist()


def _batch(rng: random.Random, n: int) -> pa.Table:
    records = []
    for i in range(n):
        messages = [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
        decisions = [
            {"stage": "s", "verdict": rng.choice(VERDICTS), "reason": "r", "detail": rng.choice([None, "d"])}
            for _ in range(rng.randint(0, 3))
        ]
        scores = rng.choice(
            [None, {"judge_mean": rng.random() * 10}, {"dedup": {"cluster": i, "jaccard": 0.5}}]
        )
        records.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": "b",
                "kind": "sft",
                "messages": messages,
                "decisions": decisions,
                "scores": scores,
            }
        )
    table = from_records(records)
    cut = n // 3  # several chunks, as stages' concatenations make them
    return pa.concat_tables([table.slice(0, cut), table.slice(cut)])


@pytest.mark.parametrize("seed", range(6))
def test_trail_helpers_match_the_row_by_row_versions(seed: int) -> None:
    rng = random.Random(seed)
    table = _batch(rng, rng.choice([1, 2, 7, 40]))
    n = table.num_rows
    trails = table.column("decisions").to_pylist()
    expected_dropped = [any(d["verdict"] in ("drop", "reject") for d in t or []) for t in trails]
    assert dropped_mask(table).to_pylist() == expected_dropped
    assert live_rows(table) == [i for i, d in enumerate(expected_dropped) if not d]

    rows = rng.sample(range(n), rng.randint(0, n))
    verdicts = [rng.choice(VERDICTS) for _ in rows]
    reasons = [f"why{i}" for i in rows]
    details = [rng.choice([None, "x"]) for _ in rows]
    out = add_decision(table, "judge", verdicts, reasons, details, rows=rows)
    assert out.column("decisions").to_pylist() == _oracle_add(
        table, "judge", verdicts, reasons, details, rows=rows
    )
    assert out.schema == table.schema
    every = add_decision(table, "all", ["keep"] * n, ["ok"] * n)
    assert every.column("decisions").to_pylist() == _oracle_add(
        table, "all", ["keep"] * n, ["ok"] * n, [None] * n, rows=list(range(n))
    )

    means = [rng.choice([None, rng.random()]) for _ in range(n)]
    scored = set_score(table, "judge_mean", means)
    assert scored.column("scores").to_pylist() == _oracle_score(table, "judge_mean", means)
    votes = [
        [{"judge": "j", "model": "m", "score": 5.0, "verdict": "accept"}] if i % 2 else None for i in range(n)
    ]
    with_votes = set_score(scored, "judges", votes)
    assert with_votes.column("scores").to_pylist() == _oracle_score(scored, "judges", votes)
    assert with_votes.schema == table.schema
    some = rng.sample(range(n), rng.randint(0, n))
    spread = [float(i) for i in some]
    partial = set_score(with_votes, "judge_spread", spread, rows=some)
    expected = _oracle_score(with_votes, "judge_spread", [None] * n)
    old = with_votes.column("scores").to_pylist()
    for i, row in enumerate(expected):
        row["judge_spread"] = float(i) if i in some else (old[i] or {}).get("judge_spread")
    assert partial.column("scores").to_pylist() == expected


def test_bad_arguments_are_schema_errors() -> None:
    table = _batch(random.Random(0), 3)
    with pytest.raises(SchemaError, match="2 verdicts"):
        add_decision(table, "s", ["keep", "keep"], ["r", "r"], rows=[0])
    with pytest.raises(SchemaError, match="distinct indices"):
        add_decision(table, "s", ["keep", "keep"], ["r", "r"], rows=[1, 1])
    with pytest.raises(SchemaError, match="distinct indices"):
        add_decision(table, "s", ["keep"], ["r"], rows=[3])
    with pytest.raises(SchemaError, match="2 values"):
        set_score(table, "judge_mean", [1.0, 2.0])
    assert DECISION.names == ["stage", "verdict", "reason", "detail"]
