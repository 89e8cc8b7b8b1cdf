"""The transformers backend's decoding loop: a batch whose rows leave it as they end.

transformers' ``generate`` runs every row of a batch until its longest row ends, feeding finished
rows padding. The demo's sampled batches (32 rows, up to 256 tokens, most replies far shorter)
spent over a third of their forward passes on rows that had ended. This loop prefills the batch
once, then runs each step on the rows still going only, taking the ended rows out of the KV
cache (``batch_select_indices``) as they end. The cache appends each step in place
(:mod:`ptfactory.engines.kv_cache`), where transformers' ``DynamicCache`` copies it whole.

Positions follow ``generate``'s for left-padded batches (the attention mask's running count), so
a row's logits are the ones ``generate`` computes for it.

Rows that share their prompt (a request's ``n`` samples) are prefilled once: ``expand`` maps
each row to its prompt, and after the prefill the KV cache and the last logits are copied out to
the rows (a prompt's prefill is most of a short reply's cost: an agent step's prompt holds the
system prompt, the tools and the history).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from ptfactory.engines.llama_step import LlamaStep as Step

__all__ = ["decode"]

Pick = Callable[[torch.Tensor], torch.Tensor]  # rows × vocabulary logits -> one token per row


def decode(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    max_new_tokens: int,
    pick: Pick,
    eos: Collection[int],
    keep: Callable[[list[int]], None] | None = None,
    stopped: Callable[[int, list[int]], bool] | None = None,
    expand: Sequence[int] | None = None,
    step: Step | None = None,
) -> list[list[int]]:
    """Each row's generated tokens, ending with the EOS token where it took one.

    ``pick`` chooses the next token of every live row from its logits; ``keep(rows)`` is told
    which of the live rows go on (indices into them) whenever some end, so a picker holding
    per-row state can drop theirs; ``stopped(row, tokens)`` ends a row early (a stop string).
    ``expand``: the prompt (a row of ``input_ids``) of each row, where rows share prompts;
    by default one row per prompt. ``step``: a faster decoding step with the model's logits
    (:mod:`~ptfactory.engines.llama_step`), used where it ``applies`` to the live rows.
    """
    from ptfactory.engines.kv_cache import GrowingCache

    cache = GrowingCache(config=model.config)
    # transformers 5.24 names the cache argument ``cache``; earlier ones ``past_key_values``
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    out: list[list[int]] = [[] for _ in range(len(input_ids) if expand is None else len(expand))]
    live = list(range(len(out)))
    eos_ids = torch.tensor(sorted(eos), dtype=torch.long, device=input_ids.device)
    step_ids, step_positions = input_ids, positions
    for _ in range(max_new_tokens):
        if step is not None and step_ids is not input_ids and step.applies(len(step_ids)):
            logits = step(cache, step_ids[:, 0], attention_mask, step_positions)
        else:
            logits = model(
                input_ids=step_ids,
                attention_mask=attention_mask,
                position_ids=step_positions,
                use_cache=True,
                logits_to_keep=1,
                **{cache_arg: cache},
            ).logits[:, -1]
        if expand is not None and step_ids is input_ids:  # the prefill: copied out to the rows
            index = torch.tensor(list(expand), dtype=torch.long, device=input_ids.device)
            cache.batch_select_indices(index)
            logits, attention_mask, step_positions = (
                logits[index],
                attention_mask[index],
                step_positions[index],
            )
        tokens = pick(logits)
        ended = torch.isin(tokens, eos_ids).tolist()
        going = []
        for slot, (row, token) in enumerate(zip(live, tokens.tolist(), strict=True)):
            out[row].append(token)
            if not ended[slot] and not (stopped is not None and stopped(row, out[row])):
                going.append(slot)
        if not going:
            break
        if len(going) < len(live):
            index = torch.tensor(going, dtype=torch.long, device=input_ids.device)
            cache.batch_select_indices(index)
            attention_mask, tokens, step_positions = (
                attention_mask[index],
                tokens[index],
                step_positions[index],
            )
            live = [live[slot] for slot in going]
            if keep is not None:
                keep(going)
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones(len(live), 1)], dim=-1)
        step_ids, step_positions = tokens[:, None], step_positions[:, -1:] + 1
    return out
