"""The model side of an episode: the prompt, the tool-call JSON schema, and the reply parser.

A reply is one JSON object: a tool call ``{"name": "bash", "arguments": {"command": "ls"}}`` or
a final answer ``{"final_answer": "..."}``. Where the engine ``supports_json_schema`` the reply
is constrained to :func:`reply_schema` (every step parses); elsewhere :func:`parse_reply` reads it
leniently (code fences, ``<tool_call>`` tags, ``tool``/``function`` for ``name``,
``parameters``/``args`` for ``arguments``, arguments given as a JSON string, text around it).

The conversation sent to the engine is the record's own: assistant ``tool_calls`` and ``tool``
messages, with the task's tools passed natively (``Engine.chat(..., tools=)``: the chat
template's ``tools``, vLLM's, OpenAI's). A backend that parses calls itself returns them in
``Completion.tool_calls`` (:func:`action_of` reads those first).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ptfactory.generators.agent.tasks import AgentTask

__all__ = ["Action", "action_of", "parse_reply", "reply_schema", "system_prompt", "validate_call"]

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


@dataclass
class Action:
    kind: str  # tool | final | unparsable | invalid
    name: str | None = None
    arguments: dict[str, Any] | None = None
    answer: str | None = None
    error: str = ""
    text: str = ""  # what the reply said besides the call (the assistant turn's content)

    @property
    def call(self) -> dict[str, Any] | None:
        return {"name": self.name, "arguments": self.arguments} if self.name is not None else None


def system_prompt(task: AgentTask) -> str:
    """The episode's system turn; the tools themselves are passed natively, not described here."""
    names = ", ".join(task.tool_names)
    return (
        f"You solve a task in a Linux workspace by calling tools ({names}), one call per reply. "
        "Look at the files before you change them and run the tests to check your work. "
        'When the task is done, reply {"final_answer": TEXT} (or a plain answer with no tool call).\n'
        "Example calls:\n"
        '{"name": "bash", "arguments": {"command": "ls"}}\n'
        '{"name": "read_file", "arguments": {"path": "main.py"}}'
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


def _said(text: str) -> str:
    """The reply's words before its call: the text ahead of a ``<tool_call>`` tag, a fence or the
    first ``{``."""
    cut = min((i for i in (text.find("<tool_call>"), text.find("```"), text.find("{")) if i >= 0), default=0)
    return text[:cut].strip()


def action_of(
    text: str, tool_calls: list[dict[str, Any]] | None, task: AgentTask, native: bool = False
) -> Action:
    """The action of a reply: the backend's parsed ``tool_calls`` when it gave them (the first
    call: an episode runs one per step), else what :func:`parse_reply` reads from the text. From
    a ``native`` backend (it parses calls itself), a reply with no call at all is a final answer."""
    if tool_calls:
        function = tool_calls[0].get("function") or {}
        value = {"name": function.get("name"), "arguments": function.get("arguments") or {}}
        action = parse_reply(json.dumps(value), task)
        action.text = text.strip()
        return action
    action = parse_reply(text, task)
    if native and action.kind == "unparsable" and text.strip():
        return Action("final", answer=text.strip())
    return action


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
                    "invalid",
                    name=name,
                    arguments={"raw": arguments},
                    error="arguments are not JSON",
                    text=_said(text),
                )
        if not isinstance(arguments, dict):
            return Action(
                "invalid", name=name, arguments={"raw": arguments}, error="arguments must be an object"
            )
        error = validate_call(name, arguments, task)
        return Action(
            "invalid" if error else "tool", name=name, arguments=arguments, error=error, text=_said(text)
        )
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
