"""Does every row render through the chat template the way training needs it?

The bugs TRL users hit: an empty turn (the model learns to say nothing), a conversation that does
not end with the assistant's answer, and an answer with no end-of-turn/EOS token after it (the
model never learns to stop). Each problem is reported with the row's sample_id.

Rows with tool calls (agent trajectories, and the ``sft`` rows made of solved ones) render with
their ``tools``, as TRL renders them: the last assistant turn is the answer (a failed episode may
end on a tool result), an assistant turn that only calls tools may have empty content, and each
call must come out of the template (a template that ignores ``tool_calls`` would train on nothing).
An ``rl`` row is a prompt without its answer: it must render with the assistant's turn opened.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["template_problems"]


def _call_texts(turn: dict[str, Any]) -> list[tuple[str, ...]]:
    """What of each tool call must appear in the rendered text: its name, and each argument value
    as it is or JSON-escaped (templates render arguments either way)."""
    texts: list[tuple[str, ...]] = []
    for call in turn.get("tool_calls") or []:
        function = call.get("function") or {}
        texts.append((str(function.get("name")),))
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            continue
        for value in arguments.values() if isinstance(arguments, dict) else []:
            if isinstance(value, str) and value:
                texts.append((value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]))
    return texts


def _check(
    tokenizer: Any,
    prompt: list[dict[str, Any]],
    answer: dict[str, Any],
    sid: str,
    tools: list[dict[str, Any]] | None = None,
) -> str | None:
    turns = [*prompt, answer]
    empty = [
        i
        for i, m in enumerate(turns)
        if not (m.get("content") or "").strip() and not m.get("tool_calls") and m.get("role") != "tool"
    ]
    if empty:
        return f"{sid}: turn {empty[0]} ({turns[empty[0]]['role']}) is empty"
    if answer["role"] != "assistant":
        return f"{sid}: the conversation ends with a {answer['role']} turn, not the assistant's answer"
    try:
        text = tokenizer.apply_chat_template(turns, tools=tools, tokenize=False)
    except Exception as exc:
        return f"{sid}: the chat template failed: {exc}"
    content = (answer.get("content") or "").strip()
    at, end = (text.rfind(content), text.rfind(content) + len(content)) if content else (-1, -1)
    if content and at < 0:
        return f"{sid}: the rendered text lost the assistant's answer"
    for alternatives in _call_texts(answer):
        places = [(text.rfind(a), len(a)) for a in alternatives if text.rfind(a) >= 0]
        if not places:
            return f"{sid}: the rendered text lost a tool call of the answer (does the template render tool_calls?)"
        end = max(end, *(i + n for i, n in places))
    tail = text[end:]
    stops = {t for t in (tokenizer.eos_token, "<|im_end|>", "<|eot_id|>", "</s>") if t}
    if not any(stop in tail for stop in stops):
        return f"{sid}: no end-of-turn token after the answer (the model would never learn to stop)"
    return None


def _prompt_only(tokenizer: Any, turns: list[dict[str, Any]], sid: str) -> str | None:
    """An rl row is a prompt the policy answers: no empty turn, no answer, and the template opens
    the assistant's turn after it (GRPO samples from there)."""
    empty = [i for i, m in enumerate(turns) if not (m.get("content") or "").strip()]
    if empty:
        return f"{sid}: turn {empty[0]} ({turns[empty[0]]['role']}) is empty"
    if turns[-1]["role"] == "assistant":
        return f"{sid}: an rl row is the prompt; it ends with an assistant turn (its answer)"
    try:
        tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    except Exception as exc:
        return f"{sid}: the chat template failed: {exc}"
    return None


def _last_assistant(tokenizer: Any, turns: list[dict[str, Any]], sid: str, tools: Any) -> str | None:
    """An episode's answer is its last assistant turn (a failed one may end on a tool result)."""
    last = max((i for i, m in enumerate(turns) if m["role"] == "assistant"), default=len(turns) - 1)
    return _check(tokenizer, turns[:last], turns[last], sid, tools)


def template_problems(rows: list[dict[str, Any]], tokenizer: Any, limit: int = 20) -> list[str]:
    """Problems found, at most ``limit`` (empty list: every row renders right)."""
    problems: list[str] = []
    for row in rows:
        messages = list(row.get("messages") or [])
        tools = json.loads(row["tools"]) if row.get("tools") else None
        if row.get("kind") == "preference" and tools is not None:  # whole episodes after a shared prompt
            found = [
                _last_assistant(tokenizer, [*messages, *(side or [])], row["sample_id"], tools)
                for side in (row.get("chosen"), row.get("rejected"))
            ]
        elif row.get("kind") == "preference":
            answers = [*(row.get("chosen") or [])[-1:], *(row.get("rejected") or [])[-1:]]
            if len(answers) < 2:
                problems.append(f"{row['sample_id']}: a preference row needs both chosen and rejected")
            found = [_check(tokenizer, messages, a, row["sample_id"]) for a in answers]
        elif not messages:
            found = [f"{row['sample_id']}: no messages"]
        elif row.get("kind") == "rl":
            found = [_prompt_only(tokenizer, messages, row["sample_id"])]
        elif tools is not None:
            found = [_last_assistant(tokenizer, messages, row["sample_id"], tools)]
        else:
            found = [_check(tokenizer, messages[:-1], messages[-1], row["sample_id"])]
        problems.extend(p for p in found if p)
        if len(problems) >= limit:
            break
    return problems[:limit]
