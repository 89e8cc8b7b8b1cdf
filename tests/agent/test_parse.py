"""Reading tool calls out of replies, leniently, and validating them against the task (pure logic)."""

import json

from ptfactory.generators.agent.policy import parse_reply, reply_schema, system_prompt
from ptfactory.generators.agent.tasks import parse_task

TASK = parse_task("t:1", {"kind": "agent", "instruction": "x", "files": {"a.py": ""}, "check": "true"})


def test_plain_and_wrapped_calls() -> None:
    plain = parse_reply('{"name": "bash", "arguments": {"command": "ls"}}', TASK)
    assert (plain.kind, plain.name, plain.arguments) == ("tool", "bash", {"command": "ls"})
    fenced = parse_reply('Sure!\n```json\n{"tool": "read_file", "parameters": {"path": "a.py"}}\n```', TASK)
    assert (fenced.kind, fenced.name, fenced.arguments) == ("tool", "read_file", {"path": "a.py"})
    tagged = parse_reply('<tool_call>{"name": "run_tests", "arguments": "{}"}</tool_call>', TASK)
    assert (tagged.kind, tagged.name) == ("tool", "run_tests")
    openai = parse_reply('{"function": {"name": "bash", "arguments": "{\\"command\\": \\"pwd\\"}"}}', TASK)
    assert (openai.kind, openai.arguments) == ("tool", {"command": "pwd"})
    trailing = parse_reply('I will run {"name": "bash", "arguments": {"command": "ls"}} now. {', TASK)
    assert trailing.kind == "tool"


def test_final_unparsable_and_invalid() -> None:
    assert parse_reply('{"final_answer": "done"}', TASK).kind == "final"
    assert parse_reply("I think the bug is in line 3.", TASK).kind == "unparsable"
    unknown = parse_reply('{"name": "rm_rf", "arguments": {}}', TASK)
    assert unknown.kind == "invalid" and "unknown tool" in unknown.error
    missing = parse_reply('{"name": "write_file", "arguments": {"path": "a.py"}}', TASK)
    assert missing.kind == "invalid" and "'content'" in missing.error
    typed = parse_reply('{"name": "bash", "arguments": {"command": 3}}', TASK)
    assert typed.kind == "invalid" and "string" in typed.error
    extra = parse_reply('{"name": "bash", "arguments": {"command": "ls", "sudo": true}}', TASK)
    assert extra.kind == "invalid" and "'sudo'" in extra.error


def test_schema_covers_every_tool_and_the_final_answer() -> None:
    schema = reply_schema(TASK)
    names = [b["properties"]["name"]["const"] for b in schema["anyOf"] if "name" in b["properties"]]
    assert names == ["bash", "read_file", "write_file", "run_tests"]
    assert any("final_answer" in b["properties"] for b in schema["anyOf"])
    json.dumps(schema)
    first = reply_schema(TASK, final=False)  # the first step must look before it answers
    assert len(first["anyOf"]) == 4 and not any("final_answer" in b["properties"] for b in first["anyOf"])
    prompt = system_prompt(TASK)
    assert all(name in prompt for name in names) and "final_answer" in prompt
