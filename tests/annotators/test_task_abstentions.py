"""The judge trail an annotator reads in a Label Studio task: an abstention reads as one, and
``unparsed`` is kept for a reply that did not parse (issue 39 item 9)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ptfactory.annotators.labelstudio.tasks import to_task
from ptfactory.storage.schema import conform
from tests.conftest import make_rows


def _vote(judge: str, model: str, score: float | None, verdict: str, **extra: Any) -> dict[str, Any]:
    return {
        "judge": judge,
        "model": model,
        "score": score,
        "verdict": verdict,
        "raw": "",
        "parsed": True,
        "method": "json",
        "confidence": None,
        "rationale": "",
        **extra,
    }


def _task_row(votes: list[dict[str, Any]]) -> dict[str, Any]:
    """A routed sft row (no code run) with ``votes``, read back as stored rows are."""
    row = make_rows(1).to_pylist()[0]
    row["scores"] = {"judges": votes, "judge_mean": 8.0, "judge_spread": 0.0}
    row["decisions"] = [
        *row["decisions"],
        {"stage": "route", "verdict": "route", "reason": "needs_review", "detail": "spread 4.00"},
    ]
    stored = conform(pa.Table.from_pylist([row], schema=make_rows(1).schema))
    return stored.to_pylist()[0]


def test_an_abstaining_judge_reads_as_an_abstention_not_unparsed() -> None:
    votes = [
        # what the execution judge records on a row with no code run
        _vote(
            "execution", "sandbox", None, "abstain", method="execution", rationale="not an executed code row"
        ),
        _vote("tiny", "m", None, "unparsed", parsed=False, method="unparsed", raw="I think it is fine"),
        _vote("big", "m2", 8.0, "accept", rationale="correct"),
    ]
    text = to_task(_task_row(votes))["data"]["judges"]
    lines = text.splitlines()
    assert lines[0] == "execution (sandbox): abstains — not an executed code row", text
    assert lines[1] == "tiny (m): unparsed — I think it is fine", text
    assert lines[2] == "big (m2): 8/10 — correct", text
