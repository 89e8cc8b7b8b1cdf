"""Expert review of agent trajectories: the task shows each step and offers them as the first wrong
step; the label becomes step labels, and a preference pair on the prefix where a solved rollout of
the same task took another action after the same ones."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pyarrow as pa

from ptfactory.annotators.curation import curate
from ptfactory.annotators.labelstudio.configs import LABEL_CONFIGS
from ptfactory.annotators.labelstudio.ledger import EVENT_SCHEMA
from ptfactory.annotators.labelstudio.results import Label, combine, parse_result
from ptfactory.annotators.labelstudio.tasks import queue_of, to_task
from ptfactory.storage.schema import from_records, sample_id


def _call(i: int, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments, sort_keys=True)}
    return {"id": f"call_{i}", "type": "function", "function": function}


def trajectory(actions: list[tuple[str, dict[str, str]]], solved: bool, task: str = "t1") -> dict[str, Any]:
    """A trajectory row: one tool call a step, each answered by a tool message, then the final answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Make the tests pass."},
    ]
    steps = []
    for i, (name, arguments) in enumerate(actions):
        messages.append({"role": "assistant", "content": "", "tool_calls": [_call(i, name, arguments)]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "name": name, "content": f"out {i}"})
        steps.append(
            {
                "index": i,
                "kind": "tool",
                "name": name,
                "arguments": json.dumps(arguments, sort_keys=True),
                "status": "ok",
                "exit_code": 0 if solved or i == 0 else 1,
                "duration_ms": 12.0,
                "output_tail": f"out {i}",
            }
        )
    messages.append({"role": "assistant", "content": "done"})
    steps.append({"index": len(actions), "kind": "final", "status": "ok"})
    return {
        "sample_id": sample_id("agent", messages),
        "batch": "b1",
        "kind": "agent",
        "messages": messages,
        "steps": steps,
        "outcome": {"task_id": task, "solved": solved, "stop_reason": "final_answer", "n_steps": len(steps)},
        "scores": {"judges": [{"judge": "j", "model": "m", "score": 4.0}], "judge_mean": 4.0},
        "decisions": [{"stage": "route", "verdict": "route", "reason": "needs_review", "detail": None}],
    }


LS = ("bash", {"command": "ls"})
FIX = ("write_file", {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"})
WRONG = ("write_file", {"path": "calc.py", "content": "def add(a, b):\n    return a - b\n"})


def test_a_trajectory_task_shows_its_steps_and_offers_them_as_the_first_wrong_step() -> None:
    row = trajectory([LS, WRONG], solved=False)
    assert queue_of(row) == "agent"
    task = to_task(row)
    data = task["data"]
    assert data["instruction"] == "Make the tests pass."
    assert [p["author"] for p in data["steps"]] == ["step 1", "step 2", "step 3"]
    assert "bash" in data["steps"][0]["text"] and "exit code 0" in data["steps"][0]["text"]
    assert [o["alias"] for o in data["step_options"]] == ["0", "1", "2", "none"]
    assert data["outcome"].startswith("not solved")
    assert task["predictions"][0]["result"][0]["to_name"] == "steps"
    config = ET.fromstring(LABEL_CONFIGS["agent"])
    (choices,) = [t for t in config.iter("Choices") if t.get("name") == "first_error"]
    assert choices.get("value") == "$step_options" and choices.get("toName") == "steps"
    audit = ET.fromstring(LABEL_CONFIGS["agent-audit"])
    assert not any(t.get("value") == "$judges" for t in audit.iter())


def test_the_first_wrong_step_is_read_and_combined() -> None:
    def result(step: str) -> list[dict[str, Any]]:
        return [
            {"from_name": "first_error", "type": "choices", "value": {"choices": [step]}},
            {"from_name": "verdict", "type": "choices", "value": {"choices": ["reject"]}},
        ]

    assert parse_result(result("1")).first_error == 1
    assert parse_result(result("none")).first_error == -1
    assert parse_result(result("step 2")).first_error is None  # not one of our aliases: ignored
    two = combine([Label("reject", first_error=2), Label("reject", first_error=1)])
    assert two is not None and two.first_error == 1  # a tie: the earliest wrong step


def _labels(entries: list[tuple[str, str, str]]) -> pa.Table:
    events = []
    for seq, (sid, step, verdict) in enumerate(entries, start=1):
        result = [
            {"from_name": "first_error", "type": "choices", "value": {"choices": [step]}},
            {"from_name": "verdict", "type": "choices", "value": {"choices": [verdict]}},
        ]
        events.append(
            {
                "seq": seq,
                "event": "created",
                "annotation_id": seq,
                "task_id": seq,
                "project_id": 1,
                "queue": "agent",
                "sample_id": sid,
                "annotator": "expert@x",
                "result": json.dumps(result),
                "was_cancelled": False,
                "updated_at": str(seq),
                "lead_time_s": 1.0,
                "pulled_at": 0.0,
            }
        )
    return pa.Table.from_pylist(events, schema=EVENT_SCHEMA)


def test_step_labels_and_a_pair_on_the_prefix_a_solved_rollout_shares() -> None:
    failed = trajectory([LS, WRONG], solved=False)
    solved = trajectory([LS, FIX], solved=True)
    other_task = trajectory([WRONG], solved=False, task="t2")  # no solved rollout of t2: no pair
    routed = from_records([failed, solved, other_task])
    curated = curate(
        routed, _labels([(failed["sample_id"], "1", "reject"), (other_task["sample_id"], "0", "reject")])
    )
    rows = {r["sample_id"]: r for r in curated.table.to_pylist()}
    assert [(s["step"], s["label"]) for s in rows[failed["sample_id"]]["step_labels"]] == [
        (0, "ok"),
        (1, "first_error"),
    ]
    assert rows[failed["sample_id"]]["step_labels"][0]["annotator"] == "expert@x"
    assert rows[failed["sample_id"]]["decisions"][-1]["reason"] == "human_reject"
    pairs = [r for r in rows.values() if r["kind"] == "preference"]
    assert len(pairs) == 1 and curated.counts["step_labelled"] == 2
    (pair,) = pairs
    assert pair["provenance"]["method"] == "step_prefix_pair"
    # the prompt: the task and the shared first step with its output; then the two actions
    assert pair["messages"] == rows[failed["sample_id"]]["messages"][:4]
    assert (
        pair["chosen"][0]["tool_calls"][0]["function"]["arguments"]
        == solved["messages"][4]["tool_calls"][0]["function"]["arguments"]
    )
    assert pair["rejected"][0]["tool_calls"][0]["function"]["arguments"] == json.dumps(
        WRONG[1], sort_keys=True
    )


def test_no_pair_when_the_solved_rollout_took_the_same_action_or_another_path() -> None:
    failed = trajectory([LS, WRONG], solved=False)
    diverged_earlier = trajectory([("bash", {"command": "cat calc.py"}), FIX], solved=True)
    curated = curate(
        from_records([failed, diverged_earlier]), _labels([(failed["sample_id"], "1", "reject")])
    )
    assert not [r for r in curated.table.to_pylist() if r["kind"] == "preference"]
    none_wrong = curate(from_records([failed]), _labels([(failed["sample_id"], "none", "accept")]))
    (row,) = none_wrong.table.to_pylist()
    assert [s["label"] for s in row["step_labels"]] == ["ok", "ok", "ok"]


def test_an_agent_pair_goes_to_the_ab_queue_and_a_rejection_drops_it() -> None:
    from ptfactory.generators.agent.samples import training_rows

    failed = trajectory([LS, WRONG], solved=False)
    solved = trajectory([LS, FIX], solved=True)
    rows = from_records([failed, solved]).to_pylist()
    for row in rows:
        row["decisions"] = [{"stage": "agent", "verdict": "keep", "reason": "episode", "detail": None}]
    (pair,) = [r for r in training_rows(rows) if r["kind"] == "preference"]
    pair["decisions"] = [
        *pair["decisions"],
        {"stage": "route", "verdict": "route", "reason": "needs_review", "detail": None},
    ]
    assert pair["steps"] and queue_of(pair) == "preference"  # an A/B task, though it carries steps
    events = _labels([(pair["sample_id"], "none", "reject")])
    (curated,) = [
        r
        for r in curate(from_records([pair]), events).table.to_pylist()
        if r["sample_id"] == pair["sample_id"]
    ]
    assert (curated["decisions"][-1]["verdict"], curated["decisions"][-1]["reason"]) == (
        "reject",
        "human_reject",
    )
