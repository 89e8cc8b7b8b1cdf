"""Label configs and tasks: review boxes start from the response, audit tasks show the machines nothing."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from ptfactory.annotators.labelstudio.configs import AUDIT_QUEUES, LABEL_CONFIGS, QUEUES, project_title
from ptfactory.annotators.labelstudio.tasks import queue_of, to_task
from tests.conftest import make_rows


def _tags(queue: str) -> list[ET.Element]:
    return list(ET.fromstring(LABEL_CONFIGS[queue]).iter())


def _row(kind: str = "sft", reason: str = "needs_review", detail: str = "spread 4.00") -> dict[str, Any]:
    row = make_rows(1, kind=kind).to_pylist()[0]
    row["scores"] = {
        "judges": [{"judge": "j", "model": "m", "score": 9.0, "rationale": "good"}],
        "judge_mean": 9.0,
        "execution": {"status": "passed", "exit_code": 0, "duration_ms": 3.0},
    }
    row["decisions"] = [
        *row["decisions"],
        {"stage": "route", "verdict": "route", "reason": reason, "detail": detail},
    ]
    return row


@pytest.mark.parametrize("queue", ["sft", "code"])
def test_review_configs_prefill_the_corrected_box_with_the_response(queue: str) -> None:
    (box,) = [t for t in _tags(queue) if t.tag == "TextArea" and t.get("name") == "corrected"]
    assert box.get("value") == "$response"
    assert any(t.get("value") == "$judges" for t in _tags(queue))
    assert "response" in to_task(_row(queue))["data"]  # what $response reads


@pytest.mark.parametrize("queue", AUDIT_QUEUES)
def test_audit_configs_show_no_judges_and_prefill_nothing(queue: str) -> None:
    tags = _tags(queue)
    assert not any(t.get("value") in ("$judges", "$execution") for t in tags)
    assert all(t.get("value") is None for t in tags if t.tag == "TextArea")
    assert any("Blind audit" in (t.get("value") or "") for t in tags if t.tag == "Header")
    assert project_title("ptf review", queue) == f"ptf review: {queue}"
    assert queue in QUEUES  # pulled like the review queues


@pytest.mark.parametrize("kind", ["sft", "code"])
def test_audit_tasks_carry_no_votes_no_mean_no_execution_and_no_predictions(kind: str) -> None:
    row = _row(kind, reason="audit", detail="audit of auto_accept; mean 9.00, spread 0.00")
    assert queue_of(row) == f"{kind}-audit"
    task = to_task(row)
    assert task["data"]["audit"] is True
    assert task["predictions"] == []
    assert not {"judges", "judge_mean", "execution"} & set(task["data"])
    assert task["data"]["response"] == row["messages"][-1]["content"]
    review = to_task(_row(kind))
    assert review["data"]["audit"] is False and review["predictions"] and "judges" in review["data"]
    assert queue_of(_row(kind)) == kind
