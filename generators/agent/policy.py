"""The model side of an episode: the prompt, the tool-call JSON schema, and the reply parser.

A reply is one JSON object: a tool call ``{"name": "bash", "arguments": {"command": "ls"}}`` or
a final answer ``{"final_answer": "..."}``. Where the engine ``supports_json_schema`` the reply
is constrained to :func:`reply_schema` (every step parses); elsewhere :func:`parse_reply` reads it
leniently (code fences, ``<tool_call>`` tags, ``tool``/``function`` for ``name``,
``parameters``/``args`` for ``arguments``, arguments given as a JSON string, text around it).

The conversation sent to the engine is plain ``{role, content}`` (what every backend takes): the
tools are described in the system message and tool results come back as user turns. The
trajectory record keeps the structured form: assistant ``tool_calls`` and ``tool`` messages.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ptfactory.generators.agent.tasks import AgentTask

__all__ = ["Action", "parse_reply", "reply_schema", "system_prompt", "validate_call"]

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


@dataclass
class Action:
    kind: str  # tool | final | unparsable | invalid
    name: str | None = None
    arguments: dict[str, Any] | None = None
    answer: str | None = None
    error: str = ""

    @property
    def call(self) -> dict[str, Any] | None:
        return {"name": self.name, "arguments": self.arguments} if self.name is not None else None


def system_prompt(task: AgentTask) -> str:
    tools = "\n".join(
        f"- {t['function']['name']}: {t['function'].get('description', '')} "
        f"arguments: {json.dumps(t['function'].get('parameters', {}).get('properties', {}))}"
        for t in task.tools
    )
    return (
        "You solve a task in a Linux workspace by calling tools, one call per reply.\n"
        f"Tools:\n{tools}\n"
        'Reply with one JSON object only: {"name": TOOL, "arguments": {...}} to call a tool, or '
        '{"final_answer": TEXT} when the task is done. No other text.\n'
        "Example replies:\n"
        '{"name": "bash", "arguments": {"command": "ls"}}\n'
        '{"name": "read_file", "arguments": {"path": "main.py"}}\n'
        '{"name": "run_tests", "arguments": {}}'
    )


def reply_schema(task: AgentTask, final: bool = True) -> dict[str, Any]:
    """JSON schema of one reply: any of the task's tool calls, or (where ``final``) a final
    answer. Rollouts leave the final answer out of the first step: an answer given before
    looking at the workspace is never grounded, and small models take that exit at once."""
    calls = [
        {
            "type": "object",
            "properties": {
                "name": {"const": t["function"]["name"]},
                "arguments": t["function"].get("parameters", {"type": "object"}),
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in task.tools
    ]
    answer = {
        "type": "object",
        "properties": {"final_answer": {"type": "string"}},
        "required": ["final_answer"],
        "additionalProperties": False,
    }
    return {"anyOf": [*calls, answer] if final else calls}


def _objects(text: str) -> list[Any]:
    """JSON values found in ``text``: the whole of it, fenced or tagged blocks, then each ``{…}``."""
    candidates = [text.strip(), *_TAG.findall(text), *_FENCE.findall(text)]
    found: list[Any] = []
    for candidate in candidates:
        try:
            found.append(json.loads(candidate))
        except (json.JSONDecodeError, ValueError):
            continue
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text[match.start() :])
        except json.JSONDecodeError:
            continue
        found.append(value)
    return found


def parse_reply(text: str, task: AgentTask) -> Action:
    """The action a reply asks for; ``unparsable`` when no call or answer can be read from it,
    ``invalid`` when it names no tool of the task or its arguments do not fit the tool."""
    for found in _objects(text):
        if not isinstance(found, dict):
            continue
        value = found
        if "final_answer" in value:
            return Action("final", answer=str(value["final_answer"]))
        name = value.get("name", value.get("tool", value.get("function")))
        if isinstance(name, dict):  # OpenAI's {"function": {"name", "arguments"}}
            value, name = name, name.get("name")
        if not isinstance(name, str):
            continue
        arguments = value.get("arguments", value.get("parameters", value.get("args", {})))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                return Action(
                    "invalid", name=name, arguments={"raw": arguments}, error="arguments are not JSON"
                )
        if not isinstance(arguments, dict):
            return Action(
                "invalid", name=name, arguments={"raw": arguments}, error="arguments must be an object"
            )
        error = validate_call(name, arguments, task)
        return Action("invalid" if error else "tool", name=name, arguments=arguments, error=error)
    return Action("unparsable", error='no JSON tool call found; reply {"name": TOOL, "arguments": {...}}')


def validate_call(name: str, arguments: dict[str, Any], task: AgentTask) -> str:
    """Why a call does not fit the task's tools (empty when it does)."""
    spec = next((t["function"] for t in task.tools if t["function"]["name"] == name), None)
    if spec is None:
        return f"unknown tool {name!r}; tools: {', '.join(task.tool_names)}"
    parameters = spec.get("parameters", {})
    properties = parameters.get("properties", {})
    missing = [k for k in parameters.get("required", []) if k not in arguments]
    if missing:
        return f"{name}: missing argument {missing[0]!r}"
    extra = [k for k in arguments if k not in properties]
    if extra and parameters.get("additionalProperties") is False:
        return f"{name}: unknown argument {extra[0]!r}"
    for key, value in arguments.items():
        if properties.get(key, {}).get("type") == "string" and not isinstance(value, str):
            return f"{name}: argument {key!r} must be a string"
    return ""
