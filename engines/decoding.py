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
system prompt, the tools and the history). Prompts that only open alike (a chat template's system
prompt, a shared instruction) run that opening once, then each its rest (``_prefill``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ptfactory.engines.packed_linear import prefilling

if TYPE_CHECKING:
    from ptfactory.engines.llama_step import LlamaStep as Step

__all__ = ["decode"]

# token-rows an opening shared by the prompts must save before it is prefilled once (a second
# forward pass costs a few milliseconds; a token-row of SmolLM2 about 0.7 ms on 2 cores)
SHARED_MIN = 64

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
    """Each row's generated tokens, ending with the EOS token where it took one; ``input_ids``
    left-padded (``attention_mask`` zero at the padding), as for transformers' ``generate``.

    ``pick`` chooses the next token of every live row from its logits; ``keep(rows)`` is told
    which of the live rows go on (indices into them) whenever some end, so a picker holding
    per-row state can drop theirs; ``stopped(row, tokens)`` ends a row early (a stop string).
    ``expand``: the prompt (a row of ``input_ids``) of each row, where rows share prompts;
    by default one row per prompt. ``step``: a faster decoding step with the model's logits
    (:mod:`~ptfactory.engines.llama_step`), used where it ``applies`` to the live rows.
    """
    from ptfactory.engines.kv_cache import GrowingCache

    if max_new_tokens <= 0:
        return [[] for _ in range(len(input_ids) if expand is None else len(expand))]
    cache = GrowingCache(config=model.config)
    cache_arg = cache_keyword(model.forward)

    def forward(ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return model(  # type: ignore[no-any-return]
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{cache_arg: cache},
        ).logits[:, -1]

    with prefilling():  # its wide products on the packed kernel where that is the faster
        logits, attention_mask, step_positions = _prefill(forward, cache, input_ids, attention_mask)
    if expand is not None:  # the prefill copied out to the rows
        index = torch.tensor(list(expand), dtype=torch.long, device=input_ids.device)
        cache.batch_select_indices(index)
        logits, attention_mask, step_positions = logits[index], attention_mask[index], step_positions[index]
    out: list[list[int]] = [[] for _ in range(len(logits))]
    live = list(range(len(out)))
    eos_ids = torch.tensor(sorted(eos), dtype=torch.long, device=input_ids.device)
    for count in range(max_new_tokens):
        tokens = pick(logits)
        ended = torch.isin(tokens, eos_ids).tolist()
        going = []
        for slot, (row, token) in enumerate(zip(live, tokens.tolist(), strict=True)):
            out[row].append(token)
            if not ended[slot] and not (stopped is not None and stopped(row, out[row])):
                going.append(slot)
        if not going or count + 1 == max_new_tokens:
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
        step_positions = step_positions + 1
        if step is not None and step.applies(len(tokens)):
            logits = step(cache, tokens, attention_mask, step_positions)
        else:
            logits = forward(tokens[:, None], attention_mask, step_positions)
    return out


def _prefill(
    forward: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    cache: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The prompts' last logits, the attention mask over the cache and each row's last position
    (rows x 1), the prompts' keys and values in ``cache``.

    Where the prompts open with the same tokens (a chat template's system prompt, a shared
    instruction) and that saves at least ``SHARED_MIN`` token-rows, the opening is run once, its
    keys and values copied to every row, and then each row's rest: the cache then holds
    [opening | padding | rest], the mask zero at the padding, and positions skip it, so each row
    sees what it sees alone (up to the order of the products' sums, which differs as it does
    between batch sizes)."""
    rows = len(input_ids)
    texts = [ids[mask.bool()].tolist() for ids, mask in zip(input_ids, attention_mask, strict=True)]
    opening = common_opening(texts)
    if not shares_opening(opening, rows, cache):
        positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
        return forward(input_ids, attention_mask, positions), attention_mask, positions[:, -1:]
    open_once(forward, cache, torch.tensor(texts[0][:opening], device=input_ids.device), rows)
    rests = [text[opening:] for text in texts]
    width = max(len(rest) for rest in rests)
    ids = input_ids.new_zeros(rows, width)
    rest_mask = attention_mask.new_zeros(rows, width)
    for row, rest in enumerate(rests):  # left-padded, as the prompts were
        ids[row, width - len(rest) :] = torch.tensor(rest, dtype=ids.dtype)
        rest_mask[row, width - len(rest) :] = 1
    positions = (opening + rest_mask.long().cumsum(-1) - 1).masked_fill(rest_mask == 0, 0)
    mask = torch.cat([attention_mask.new_ones(rows, opening), rest_mask], dim=-1)
    return forward(ids, mask, positions), mask, positions[:, -1:]


def cache_keyword(forward: Callable[..., Any]) -> str:
    """The name ``forward`` takes its cache by: transformers 5.24 ``cache``, earlier ones
    ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def shares_opening(opening: int, rows: int, cache: Any) -> bool:
    """Whether ``rows`` prompts opening with ``opening`` alike run it once: where that saves
    ``SHARED_MIN`` token-rows, and not on models whose sliding windows count cache slots
    (padding included: those run their batch whole)."""
    return opening * (rows - 1) >= SHARED_MIN and bool(getattr(cache, "keeps_everything", False))


def open_once(
    forward: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    cache: Any,
    opening: torch.Tensor,
    rows: int,
) -> None:
    """Run ``opening`` (its tokens) once at one row through ``forward(ids, mask, positions)``
    into ``cache``, then copy its keys and values out to ``rows`` rows."""
    device, width = opening.device, len(opening)
    forward(
        opening[None],
        torch.ones(1, width, dtype=torch.long, device=device),
        torch.arange(width, device=device)[None],
    )
    cache.batch_select_indices(torch.zeros(rows, dtype=torch.long, device=device))


def common_opening(texts: Sequence[list[int]]) -> int:
    """How many opening tokens all ``texts`` share, leaving each at least its last token (whose
    logits the prefill returns)."""
    shared = min(len(text) for text in texts) - 1
    first = texts[0]
    for text in texts[1:]:
        shared = min(
            shared, next((i for i, (a, b) in enumerate(zip(first, text, strict=False)) if a != b), shared)
        )
    return max(shared, 0)
