"""``sample_id``: the stable content hash of a sample."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["plain_sample_id", "sample_id"]


def _turn(message: Mapping[str, Any]) -> list[Any]:
    """``[role, content]`` as schema 1 hashed it; a turn with tool calls (or answering one) adds
    them, so two trajectories that differ only in a call's arguments get different ids while a
    plain turn hashes as it always did."""
    turn: list[Any] = [message["role"], message["content"]]
    calls = message.get("tool_calls")
    call_id = message.get("tool_call_id")
    if calls or call_id is not None:
        turn.append([[c.get("id"), c["function"]["name"], c["function"]["arguments"]] for c in calls or []])
        turn.append([call_id, message.get("name")])
    return turn


def sample_id(
    kind: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    chosen: Sequence[Mapping[str, Any]] | None = None,
    rejected: Sequence[Mapping[str, Any]] | None = None,
    tests: str | None = None,
    entry_point: str | None = None,
    tools: str | None = None,
) -> str:
    """A stable content hash: the same content gives the same id on any machine, in any batch.

    Only content goes in (not batch, provenance or scores), so a sample generated twice
    is recognisably the same sample. Tool calls and the offered ``tools`` (canonical JSON) are
    content too; a row without either (every schema-1 row) hashes exactly as schema 1 did.
    """

    def turns(value: Sequence[Mapping[str, Any]] | None) -> list[list[Any]] | None:
        return None if value is None else [_turn(m) for m in value]

    body: list[Any] = [kind, turns(messages), turns(chosen), turns(rejected), tests, entry_point]
    if tools:
        body.append(tools)
    return _digest(body)


def plain_sample_id(
    kind: str,
    messages: list[list[Any]],
    chosen: list[list[Any]] | None = None,
    rejected: list[list[Any]] | None = None,
) -> str:
    """:func:`sample_id` of turns without tool calls given as ``[role, content]`` lists, as a
    column-wise builder has them: the same id, without a dict a turn."""
    return _digest([kind, messages, chosen, rejected, None, None])


def _digest(body: list[Any]) -> str:
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).hexdigest()
