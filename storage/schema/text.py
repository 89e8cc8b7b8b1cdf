"""What a row says: its conversation as text, its prompt and its response.

``messages`` is a row's chat as ``table.to_pylist()`` gives it: a list of ``{role, content}``
dicts (or None). The callers differ in what "the prompt" and "the response" mean, so each
choice is a keyword, never a guess:

- ``prompt_of``: the first user turn (system turns and later turns ignored); or, with
  ``context=True``, every turn before the final answer, so a reviewer sees the whole exchange.
  A conversation without a user turn gives ``""``, or raises :class:`SchemaError` with
  ``required=True`` (stages that cannot run without an instruction).
- ``response_of``: the final turn when it is the assistant's (a conversation that ends on a
  user turn has no response yet); or, with ``final_turn=False``, the last assistant turn
  wherever it stands. No response gives ``""``. A conversation with tool calls (an agent
  episode) answers with the whole episode after its task (:func:`episode_text`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from ptfactory.errors import SchemaError

__all__ = ["Messages", "episode_text", "prompt_of", "response_of", "row_texts", "turn_text"]

Messages = Sequence[Mapping[str, Any]] | None


def turn_text(message: Mapping[str, Any]) -> str:
    """A turn's content, then each tool call it makes as ``name arguments`` on a line of its own
    (a plain turn is its content, as in schema 1)."""
    calls = message.get("tool_calls") or []
    if not calls:
        return str(message["content"])
    lines = [str(message["content"] or "")] if message["content"] else []
    lines.extend(f"{c['function']['name']} {c['function']['arguments']}" for c in calls)
    return "\n".join(lines)


def episode_text(turns: Sequence[Mapping[str, Any]]) -> str:
    """An agent episode as its answer: every turn after the first user turn (calls, tool results,
    the final answer), as ``[role] text`` blocks, so judges read the process, not only its end."""
    start = next((i + 1 for i, m in enumerate(turns) if m["role"] == "user"), 0)
    return "\n\n".join(f"[{m['role']}] {turn_text(m)}" for m in turns[start:])


def row_texts(table: pa.Table) -> pa.Array:
    """Each row's conversation as one text (turns joined by newlines, tool calls included): what
    dedup and embeddings read."""
    texts = [
        "\n".join(turn_text(m) for m in messages or []) for messages in table.column("messages").to_pylist()
    ]
    return pa.array(texts, pa.string())


def prompt_of(messages: Messages, *, context: bool = False, required: bool = False) -> str:
    """The instruction of a conversation.

    ``context=False``: the first user turn's content. ``context=True``: every turn before the
    final assistant turn; one such turn is its bare content, several are ``[role] content``
    blocks separated by blank lines. ``required=True``: no user turn raises SchemaError instead
    of giving ``""``.
    """
    turns = list(messages or [])
    if context:
        if turns and turns[-1]["role"] == "assistant":
            turns = turns[:-1]
        if len(turns) == 1:
            return turn_text(turns[0])
        return "\n\n".join(f"[{m['role']}] {turn_text(m)}" for m in turns)
    for message in turns:
        if message["role"] == "user":
            return str(message["content"])
    if required:
        roles = ", ".join(str(m["role"]) for m in turns) or "none"
        raise SchemaError(
            f"a sample has no user turn (its roles: {roles}); every sample needs an instruction"
        )
    return ""


def response_of(messages: Messages, *, final_turn: bool = True) -> str:
    """The answer of a conversation, ``""`` when there is none.

    ``final_turn=True``: the last turn's content if it is an assistant turn. ``final_turn=False``:
    the last assistant turn's content, even when other turns follow it.
    """
    turns = list(messages or [])
    if any(m.get("tool_calls") or m["role"] == "tool" for m in turns):
        return episode_text(turns)
    if final_turn:
        return str(turns[-1]["content"]) if turns and turns[-1]["role"] == "assistant" else ""
    for message in reversed(turns):
        if message["role"] == "assistant":
            return str(message["content"])
    return ""
