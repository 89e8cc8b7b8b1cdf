"""Does every row render through the chat template the way training needs it?

The bugs TRL users hit: an empty turn (the model learns to say nothing), a conversation that does
not end with the assistant's answer, and an answer with no end-of-turn/EOS token after it (the
model never learns to stop). Each problem is reported with the row's sample_id.
"""

from __future__ import annotations

from typing import Any

__all__ = ["template_problems"]


def _check(tokenizer: Any, prompt: list[dict[str, str]], answer: dict[str, str], sid: str) -> str | None:
    turns = [*prompt, answer]
    empty = [i for i, m in enumerate(turns) if not (m.get("content") or "").strip()]
    if empty:
        return f"{sid}: turn {empty[0]} ({turns[empty[0]]['role']}) is empty"
    if answer["role"] != "assistant":
        return f"{sid}: the conversation ends with a {answer['role']} turn, not the assistant's answer"
    try:
        text = tokenizer.apply_chat_template(turns, tokenize=False)
    except Exception as exc:
        return f"{sid}: the chat template failed: {exc}"
    at = text.rfind(answer["content"].strip())
    if at < 0:
        return f"{sid}: the rendered text lost the assistant's answer"
    tail = text[at + len(answer["content"].strip()) :]
    stops = {t for t in (tokenizer.eos_token, "<|im_end|>", "<|eot_id|>", "</s>") if t}
    if not any(stop in tail for stop in stops):
        return f"{sid}: no end-of-turn token after the answer (the model would never learn to stop)"
    return None


def template_problems(rows: list[dict[str, Any]], tokenizer: Any, limit: int = 20) -> list[str]:
    """Problems found, at most ``limit`` (empty list: every row renders right)."""
    problems: list[str] = []
    for row in rows:
        messages = list(row.get("messages") or [])
        if row.get("kind") == "preference":
            answers = [*(row.get("chosen") or [])[-1:], *(row.get("rejected") or [])[-1:]]
            if len(answers) < 2:
                problems.append(f"{row['sample_id']}: a preference row needs both chosen and rejected")
            found = [_check(tokenizer, messages, a, row["sample_id"]) for a in answers]
        elif not messages:
            found = [f"{row['sample_id']}: no messages"]
        else:
            found = [_check(tokenizer, messages[:-1], messages[-1], row["sample_id"])]
        problems.extend(p for p in found if p)
        if len(problems) >= limit:
            break
    return problems[:limit]
