"""Tool calls in a conversation, in the form each backend takes them."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["tool_call_messages"]

Conversation = list[dict[str, Any]]


def tool_call_messages(conversation: Conversation, arguments: str = "object") -> Conversation:
    """The conversation with every tool call's ``arguments`` as the backend wants them: ``object``
    (chat templates: transformers, vLLM) or ``json`` (a string: the OpenAI API). The sample record
    keeps them as JSON strings."""
    out: Conversation = []
    for message in conversation:
        calls = message.get("tool_calls")
        turn = {k: v for k, v in message.items() if v is not None}
        if calls:
            turn["tool_calls"] = []
            for call in calls:
                function = dict(call["function"])
                value = function.get("arguments")
                if arguments == "object" and isinstance(value, str):
                    try:
                        function["arguments"] = json.loads(value)
                    except json.JSONDecodeError:
                        function["arguments"] = {"raw": value}  # an invalid call, as the model said it
                elif arguments == "json" and not isinstance(value, str):
                    function["arguments"] = json.dumps(value)
                turn["tool_calls"].append({**call, "function": function})
        out.append(turn)
    return out
