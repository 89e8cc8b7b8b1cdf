"""Verifiers over a table of sample records: the applicable ones per row, recorded in
``scores.verifiers`` (schema 3); verifier inputs built from named columns (`ptf judge`'s flags)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from ptfactory.errors import UserInputError
from ptfactory.filters.verify import (
    AnswerVerifier,
    ConstraintsVerifier,
    MathVerifyPool,
    ProceduralVerifier,
    Verdict,
    WorkerPool,
    record_verdicts,
    reference_record,
    verifier_inputs,
    verify_table,
)
from ptfactory.storage.schema import from_records, sample_id, validate_table


def record(i: int, prompt: str, response: str, reference: dict[str, Any] | None) -> dict[str, Any]:
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
    return {
        "sample_id": sample_id("sft", messages),
        "batch": "b1",
        "kind": "sft",
        "messages": messages,
        "reference": reference,
        "decisions": [{"stage": "respond", "verdict": "keep", "reason": "sampled", "detail": str(i)}],
    }


@pytest.fixture(scope="module")
def pool() -> Iterator[MathVerifyPool]:
    with MathVerifyPool(workers=1) as shared:
        yield shared


def test_verify_table_and_record(pool: MathVerifyPool) -> None:
    table = from_records(
        [
            record(0, "2 + 16?", "It is 18.", reference_record(answer="18", source="answer")),
            record(
                1,
                "Write a note without commas.",
                "Hi, all",
                reference_record(constraints=[{"type": "no_comma"}]),
            ),
            record(2, "Tell me a story.", "Once upon a time.", None),
            record(3, "2 + 2?", "The answer is 5.", reference_record(answer="4", source="response")),
        ]
    )
    verifiers = [AnswerVerifier(pool), ConstraintsVerifier(), ProceduralVerifier(WorkerPool(workers=0))]
    seen: list[tuple[int, int]] = []
    verdicts = verify_table(
        table, verifiers, batch_size=2, progress=lambda done, total: seen.append((done, total))
    )
    assert seen == [(2, 4), (4, 4)]
    assert [[v.verdict for v in row] for row in verdicts] == [["pass"], ["fail"], [], ["fail"]]
    assert verdicts[1][0].kind == "constraints" and verdicts[3][0].evidence["extracted"] == "5"
    only = verify_table(table, verifiers, rows=[3])
    assert only[0] == [] and [v.verdict for v in only[3]] == ["fail"]

    scored = record_verdicts(table, verdicts)
    validate_table(scored)
    votes = scored.column("scores").to_pylist()
    assert votes[2]["verifiers"] is None
    vote = votes[3]["verifiers"][0]
    assert (vote["verifier"], vote["verdict"], vote["final"], vote["score"]) == ("answer", "fail", True, 0.0)
    assert json.loads(vote["evidence"])["expected"] == "4"
    assert Verdict.from_record(vote) == verdicts[3][0]  # the record reads back as the verdict


def test_a_bad_verdict_does_not_validate() -> None:
    table = from_records([record(0, "q", "a", None)])
    bad = Verdict("answer", "answer", "pass", "correct", 1.0).to_record() | {"verdict": "maybe"}
    broken = table.set_column(
        table.schema.get_field_index("scores"),
        "scores",
        pa.array([{"verifiers": [bad]}], table.schema.field("scores").type),
    )
    with pytest.raises(Exception, match="verdict 'maybe'; every vote names its verifier"):
        validate_table(broken)


def test_verifier_inputs_from_named_columns(pool: MathVerifyPool) -> None:
    table = pa.table(
        {
            "question": ["2 + 16?", "Write inc.", "Say hi."],
            "reply": ["18", "def inc(x): return x + 1", "hi"],
            "gold": ["#### 18", None, "hello"],
            "unit_tests": [None, "def check(candidate):\n    assert candidate(1) == 2\n", None],
            "fn": [None, "inc", None],
        }
    )
    inputs = verifier_inputs(
        table, reference_column="gold", tests_column="unit_tests", entry_point_column="fn"
    )
    assert inputs[0]["reference"] == reference_record(answer="18", source="column:gold")
    assert inputs[1]["reference"] is None and inputs[1]["entry_point"] == "inc"
    rows = [
        {
            "kind": "sft",
            "messages": [{"role": "user", "content": q}, {"role": "assistant", "content": r}],
            **extra,
        }
        for q, r, extra in zip(
            table.column("question").to_pylist(), table.column("reply").to_pylist(), inputs, strict=True
        )
    ]
    answer = AnswerVerifier(pool)
    assert [answer.verify(r).verdict for r in (rows[0], rows[2])] == ["pass", "fail"]
    with pytest.raises(
        UserInputError, match=r"--reference-column 'answer': no such column; columns: question, reply"
    ):
        verifier_inputs(table, reference_column="answer")
    # MBPP's test_list: a list of assert lines is one program; anything else in the column is an error
    listed = pa.table({"t": [["assert inc(1) == 2", "assert inc(2) == 3\n"], None]})
    assert [i["tests"] for i in verifier_inputs(listed, tests_column="t")] == [
        "assert inc(1) == 2\nassert inc(2) == 3",
        None,
    ]
    with pytest.raises(UserInputError, match=r"row 0: --tests-column holds list, not text"):
        verifier_inputs(pa.table({"t": [[1, 2]]}), tests_column="t")
    numbers = pa.table({"gold": [18, -7]})
    assert [i["reference"]["answer"] for i in verifier_inputs(numbers, reference_column="gold")] == [
        "18",
        "-7",
    ]
    # a boolean label (BoolQ-style) is a yes/no reference; it gave no reference before
    labels = pa.table({"gold": [True, False, None]})
    assert [
        i["reference"] and i["reference"]["answer"] for i in verifier_inputs(labels, reference_column="gold")
    ] == [
        "true",
        "false",
        None,
    ]
