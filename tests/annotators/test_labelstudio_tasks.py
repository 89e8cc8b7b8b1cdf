"""Label configs and tasks: review boxes start from the response, audit tasks show the machines nothing."""

from __future__ import annotations

import json
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


def _verdict(verifier: str, kind: str, verdict: str, reason: str, **evidence: Any) -> dict[str, Any]:
    return {
        "verifier": verifier,
        "kind": kind,
        "verdict": verdict,
        "reason": reason,
        "score": {"pass": 1.0, "abstain": None}.get(verdict, 0.0),
        "partial": evidence.pop("partial", None),
        "final": verdict == "fail",
        "evidence": json.dumps(evidence),
    }


def test_experts_see_the_verifiers_evidence_and_no_verdict_they_contradict() -> None:
    """A wrong math answer the judges love: the task shows the reference and the extracted answer
    beside the votes, the answer verifier's reject is a prediction and no judge's accept is."""
    row = _row("sft")
    row["reference"] = {
        "answer": "18",
        "source": "answer",
        "family": None,
        "metadata": None,
        "constraints": None,
    }
    row["scores"]["judges"] = [
        {
            "judge": "answer",
            "model": "verifier:answer",
            "score": 1.0,
            "rationale": "fail: wrong_answer",
            "method": "verifier",
        },
        {"judge": "smollm2", "model": "m", "score": 9.5, "rationale": "likely", "method": "likelihood"},
    ]
    row["scores"]["verifiers"] = [
        _verdict(
            "answer", "answer", "fail", "wrong_answer", expected="18", extracted="384", rule="last_number"
        )
    ]
    task = to_task(row, accept_at=7.0)
    shown = task["data"]["verifiers"]
    assert "reference answer: 18" in shown and "answer (answer): FAIL — wrong_answer" in shown
    assert "expected '18', the response's answer '384' (found by last_number)" in shown
    choices = [p["result"][0]["value"]["choices"] for p in task["predictions"]]
    assert choices == [["reject"]] and task["predictions"][0]["model_version"] == "verifier:answer"
    assert any(t.get("value") == "$verifiers" for t in _tags("sft"))


def test_failed_assertions_and_the_agent_check_output_are_shown() -> None:
    code = _row("code")
    code["scores"]["verifiers"] = [
        _verdict("code", "code", "fail", "execution_failed", partial=0.5, status="failed", exit_code=1,
                 assertions_passed=1, assertions_total=2,
                 failed_checks=["tests.py:3: assert candidate(2) == 4 (AssertionError)"]),
    ]  # fmt: skip
    shown = to_task(code)["data"]["verifiers"]
    assert "assertions held 1/2" in shown and "tests.py:3: assert candidate(2) == 4" in shown
    assert "part credit 0.50 (never a pass)" in shown
    agent = _row("sft")
    agent["scores"]["verifiers"] = [
        _verdict("agent", "agent", "fail", "check_failed", status="failed", exit_code=1,
                 check="python -m pytest -q", output_tail="FAILED (failures=2)"),
    ]  # fmt: skip
    shown = to_task(agent)["data"]["verifiers"]
    assert "check `python -m pytest -q`" in shown and "FAILED (failures=2)" in shown
    # a pass: no judge's reject is pre-selected
    passing = _row("sft")
    passing["scores"]["judges"] = [{"judge": "j", "model": "m", "score": 2.0, "rationale": "meh"}]
    passing["scores"]["verifiers"] = [
        _verdict("answer", "answer", "pass", "correct", expected="18", extracted="18")
    ]
    choices = [p["result"][0]["value"]["choices"] for p in to_task(passing)["predictions"]]
    assert choices == [["accept"]]
    assert "verifiers" not in to_task(_row("sft", reason="audit", detail="audit of auto_accept; x"))["data"]


def test_a_reference_whose_working_does_not_hold_is_shown_as_such() -> None:
    row = _row("sft")
    row["scores"]["verifiers"] = [
        _verdict("answer", "answer", "abstain", "reference_inconsistent", expected="7400",
                 slips=["180 * 40 = 7400 (is 7200)"]),
    ]  # fmt: skip
    shown = to_task(row)["data"]["verifiers"]
    assert "the reference's own working does not hold: 180 * 40 = 7400 (is 7200)" in shown
