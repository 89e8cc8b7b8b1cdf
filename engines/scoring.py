"""The token ids a backend feeds its model to score a continuation after a prompt.

Every local backend (transformers, vLLM) scores ``continuation`` the same way: the prompt
rendered by the chat template with the assistant turn opened, then the continuation tokenized
on its own, so the continuation's tokens are exactly the ones the engine reports. With no
prompt, the first continuation token is scored after the BOS (or EOS) token.
"""

from __future__ import annotations

from typing import Any

from ptfactory.engines.base import Prompt
from ptfactory.errors import EngineError

__all__ = ["left_padded", "score_token_ids"]


def score_token_ids(tokenizer: Any, prompt: Prompt, continuation: str) -> tuple[list[int], list[int]]:
    """``(context, continuation_ids)``: the model reads ``context + continuation_ids``, and the
    log-probability of continuation token ``i`` is read at position ``len(context) + i - 1``.

    ``tokenizer`` is a Hugging Face tokenizer (vLLM's is one too). A conversation is rendered by
    its chat template; a string prompt (a completion prompt for a base model) is tokenized as is,
    with the tokenizer's special tokens (BOS).
    """
    if isinstance(prompt, str):
        context = list(tokenizer(prompt, add_special_tokens=True)["input_ids"]) if prompt else []
    elif prompt:
        prefix = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        context = list(tokenizer(prefix, add_special_tokens=False)["input_ids"]) if prefix else []
    else:
        context = []
    if not context:
        start = tokenizer.bos_token_id or tokenizer.eos_token_id
        if start is None:
            raise EngineError(
                "the tokenizer has neither a BOS nor an EOS token, so a continuation without a "
                "prompt cannot be scored; give it a prompt or use a model whose tokenizer has one"
            )
        context = [start]
    return context, list(tokenizer(continuation, add_special_tokens=False)["input_ids"])


def left_padded(pairs: list[tuple[list[int], list[int]]], pad: int) -> tuple[Any, Any, Any, int]:
    """``(input_ids, attention_mask, position_ids, keep)`` for a batch of ``(context,
    continuation_ids)``: rows padded on the left, so every continuation ends its row; positions
    count real tokens only (as ``generate`` numbers a left-padded batch); the last ``keep``
    positions (the longest continuation, plus the position before it) predict every row's
    continuation, so ``logits_to_keep=keep`` is all scoring asks of the vocabulary head."""
    import torch

    rows = [context + cont for context, cont in pairs]
    width = max(map(len, rows))
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, tokens in enumerate(rows):
        input_ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
        mask[row, width - len(tokens) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return input_ids, mask, positions, max(len(cont) for _, cont in pairs) + 1
