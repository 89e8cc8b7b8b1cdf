"""Trajectories into training rows (pure logic): difficulty by solve rate, sft rows of solved
episodes, preference pairs (solved over failed, fewer steps over more); the task's solution field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ptfactory.errors import SeedError
from ptfactory.generators.agent.samples import solve_rate_difficulty, training_rows
from ptfactory.generators.agent.tasks import parse_task
from ptfactory.storage.schema import from_records, sample_id, validate_table

TOOLS = json.dumps([{"type": "function", "function": {"name": "bash"}}])


def episode(
    task: str, rollout: int, solved: bool, steps: int, engine: str = "transformers"
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Solve it."},
        {"role": "user", "content": f"task {task}"},
    ]
    for i in range(steps):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": f'{{"n": {rollout}{i}}}'},
        }
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "ok", "tool_call_id": f"call_{i}", "name": "bash"},
        ]
    return {
        "sample_id": sample_id("agent", messages, tools=TOOLS),
        "batch": "b1",
        "kind": "agent",
        "messages": messages,
        "tools": TOOLS,
        "steps": [{"index": i, "kind": "tool"} for i in range(steps)],
        "outcome": {"task_id": task, "rollout": rollout, "solved": solved, "n_steps": steps, "task": "{}"},
        "provenance": {"engine": engine},
        "decisions": [],
    }


def reasons(row: dict[str, Any]) -> list[str]:
    return [d["reason"] for d in row["decisions"] if d["verdict"] == "drop"]


def test_difficulty_is_one_minus_the_solve_rate() -> None:
    rows = [
        episode("easy", 0, True, 1),
        episode("easy", 1, True, 2),
        episode("mixed", 0, True, 2),
        episode("mixed", 1, False, 3),
        episode("mixed", 2, True, 1),
        episode("never", 0, False, 2),
        episode("hard", 0, False, 2),
        episode("hard", 0, True, 3, engine="reference"),
    ]
    rows[1]["decisions"].append({"stage": "replay", "verdict": "drop", "reason": "not_reproducible"})
    rates = solve_rate_difficulty(rows)
    assert rates == {"easy": 1.0, "mixed": pytest.approx(2 / 3), "never": 0.0, "hard": 0.0}
    assert reasons(rows[0]) == ["too_easy"] and reasons(rows[1]) == ["not_reproducible"]
    assert rows[3]["scores"]["difficulty"] == {
        "method": "solve_rate",
        "value": pytest.approx(1 / 3),
        "detail": "2 of 3 rollouts solved the task",
    }
    assert reasons(rows[3]) == [] and reasons(rows[5]) == ["unsolvable"]
    # the model never solves it, its reference does: hard, kept
    assert reasons(rows[6]) == [] and rows[6]["scores"]["difficulty"]["value"] == 1.0


def test_identical_rollouts_are_one_sample_but_each_counts_in_the_rate() -> None:
    solved, failed = episode("t", 0, True, 1), episode("t", 1, False, 2)
    # three rollouts said and did the same (one sample_id), a fourth failed: 3 of 4 solved
    rates = solve_rate_difficulty([solved, failed], {solved["sample_id"]: 3, failed["sample_id"]: 1})
    assert rates == {"t": 0.75}
    assert solved["scores"]["difficulty"]["detail"] == "3 of 4 rollouts solved the task"


def test_solved_episodes_become_sft_rows_and_pairs() -> None:
    rows = [
        episode("t", 0, True, 2),
        episode("t", 1, False, 3),
        episode("t", 2, True, 1),
        episode("u", 0, False, 1),
    ]
    solve_rate_difficulty(rows)
    derived = training_rows(rows)
    sft = [r for r in derived if r["kind"] == "sft"]
    pairs = [r for r in derived if r["kind"] == "preference"]
    assert {r["provenance"]["parent_id"] for r in sft} == {rows[0]["sample_id"], rows[2]["sample_id"]}
    for row in sft:  # up to the last assistant turn: the call that fixed it, not its tool result
        assert row["messages"][-1]["role"] == "assistant" and row["messages"][-1]["tool_calls"]
        assert row["tools"] == TOOLS and row["outcome"]["solved"]
    # the best (fewest steps) solved over the failed one, and over the slower solved one
    assert len(pairs) == 2 and all(p["provenance"]["parent_id"] == rows[2]["sample_id"] for p in pairs)
    why = sorted(json.loads(p["decisions"][-1]["detail"])["why"] for p in pairs)
    assert why == ["fewer steps over more", "solved over failed"]
    pair = next(p for p in pairs if "failed" in p["decisions"][-1]["detail"])
    assert [m["role"] for m in pair["messages"]] == ["system", "user"]
    assert len(pair["chosen"]) == 1 and len(pair["rejected"]) == 5  # 1 call; 3 calls, 2 results
    validate_table(from_records([*rows, *derived]))


def test_solution_field_is_checked() -> None:
    row = {"kind": "agent", "instruction": "x", "files": {"a.py": ""}, "check": "true"}
    task = parse_task("t.jsonl:1", {**row, "solution": [{"name": "bash", "arguments": {"command": "ls"}}]})
    assert task.solution == [{"name": "bash", "arguments": {"command": "ls"}}]
    with pytest.raises(SeedError, match=r"t.jsonl:1: field 'solution' call 0 names no tool"):
        parse_task("t.jsonl:1", {**row, "solution": [{"name": "curl", "arguments": {}}]})
    with pytest.raises(SeedError, match="field 'solution' is not a list of calls"):
        parse_task("t.jsonl:1", {**row, "solution": "ls"})


def test_agent_section_of_factory_yaml() -> None:
    from ptfactory.config import parse_config
    from ptfactory.errors import ConfigError

    config = parse_config({"agent": {"tasks": ["t.jsonl"], "policy": "allow", "commands": ["ls", "cat"]}})
    assert config.agent.command_policy().rules == ("ls", "cat")
    assert config.agent.command_policy().check_script("curl x") != ""  # not allowed
    assert "pip* install" in parse_config({}).agent.command_policy().rules  # the built-in deny-list
    with pytest.raises(ConfigError, match="replay_sample"):
        parse_config({"agent": {"replay_sample": 2}})
