"""The transformers backend's vocabulary head: what scoring reads of it (the kept positions'
logits, a continuation's, not the prompt's), batches cut so those logits fit a budget, and on a
CPU the head's matmul cut into slices of the vocabulary (:func:`chunk_head`).

On Gemma 3 the head (262k tokens wide) is most of a small model's work, and a batch of long
continuations would otherwise hold gigabytes of logits at once. Scoring reads one number per
position of them, the target's log-probability: :func:`kept_logprobs` works it out a slice of the
vocabulary at a time (the slice's logits, a running maximum and sum of exponentials), so the
logits are never held whole and each slice is read while it is still in the cache. In the demo's
judges stage, Gemma 3's head and the log-sum-exp over its full logits were half the time.
"""

from __future__ import annotations

import functools
from typing import Any

from ptfactory.engines.bf16_scoring import in_bfloat16

__all__ = [
    "HEAD_CHUNK",
    "LOGIT_FLOATS",
    "chunk_head",
    "head_logprobs",
    "kept_logits",
    "kept_logprobs",
    "score_batches",
    "sliced_head_fits",
    "vocab_width",
]


# Logits held at once by ``_score`` (512 MB of float32): Gemma 3's vocabulary is 262k wide, so a
# batch is cut where its continuations' tokens times the vocabulary would pass this.
LOGIT_FLOATS = 128 * 1024 * 1024


# Vocabulary rows per matmul of a CPU head. On the 2-core box (AVX2, MKL), one matmul over the
# whole head at a few rows streams its weight badly; slices of 1024 rows, each written into the
# one output, ran SmolLM2's 49k-row head 1.3x (2 rows) to 1.5x (16 rows, 2 threads) and Gemma 3's
# 262k-row head 1.2x (256 rows, 1 thread) to 1.9x (8 rows, 2 threads) faster. Each logit is the
# same dot product either way: on one thread the values are identical; on two, MKL may cut a
# matmul between its threads otherwise than its slices and round a logit in its last bit (seen at a
# 3k-row head; the bundled models' 49k and 262k rows agreed), as another batch size may
# (tests/engines/test_chunked_head.py).
HEAD_CHUNK = 1024


def chunk_head(model: Any) -> None:
    """Make the model's vocabulary head (a ``Linear``) compute in slices of ``HEAD_CHUNK`` rows."""
    import torch

    head = model.get_output_embeddings()
    if isinstance(head, torch.nn.Linear) and head.out_features > HEAD_CHUNK:
        head.forward = functools.partial(chunked_linear, head, torch.nn.functional.linear)  # type: ignore[method-assign]


def chunked_linear(head: Any, linear: Any, x: Any) -> Any:
    """``head(x)``, a slice of the vocabulary at a time (``linear``: torch's, bound once)."""
    weight, bias = head.weight, head.bias
    out = x.new_empty((*x.shape[:-1], weight.shape[0]))
    for start in range(0, weight.shape[0], HEAD_CHUNK):
        end = start + HEAD_CHUNK
        out[..., start:end] = linear(x, weight[start:end], None if bias is None else bias[start:end])
    return out


def vocab_width(model: Any) -> int:
    head = model.get_output_embeddings()
    return int(getattr(head, "out_features", 0) or model.config.vocab_size)


def score_batches(
    order: list[int], kept: list[int], size: int, vocab: int, budget: int = LOGIT_FLOATS
) -> list[list[int]]:
    """``order`` cut into batches of at most ``size`` rows whose kept positions' logits fit
    ``budget`` floats (a row alone may pass it). A prefill's matmuls are wide enough at one row
    (hundreds of positions), so a smaller batch costs little."""
    batches: list[list[int]] = []
    current: list[int] = []
    held = 0
    for i in order:
        if current and (len(current) == size or (held + kept[i]) * vocab > budget):
            batches.append(current)
            current, held = [], 0
        current.append(i)
        held += kept[i]
    if current:
        batches.append(current)
    return batches


def kept_logits(model: Any, input_ids: Any, mask: Any, keep: Any) -> Any:
    """``(kept positions, vocab)`` logits, in row-major order of ``keep`` (a boolean mask).

    The model's own head (and any final soft-capping, as Gemma's) on the kept positions only,
    through ``logits_to_keep`` where this transformers takes a mask; otherwise every position's
    logits, then the kept ones (the same values, more work)."""
    if masked_head():
        return model(input_ids=input_ids, attention_mask=mask, logits_to_keep=keep).logits
    return model(input_ids=input_ids, attention_mask=mask).logits[keep]


@functools.cache
def masked_head() -> bool:
    try:
        from transformers.modeling_utils import slice_logits_to_keep  # noqa: F401  # with its mask form
    except ImportError:
        return False
    return True


def kept_logprobs(model: Any, input_ids: Any, mask: Any, keep: Any, targets: Any) -> Any:
    """The log-probability of each of ``targets`` (one per kept position, in the row-major order
    of ``keep``) at its position.

    A slice of the vocabulary at a time (:func:`head_logprobs`) on the decoder's hidden states,
    where that gives the model's own values (:func:`sliced_head_fits`); otherwise from the kept
    positions' whole logits."""
    import torch

    if sliced_head_fits(model):
        return head_logprobs(model, kept_hidden(model, input_ids, mask, keep), targets)
    logits = kept_logits(model, input_ids, mask, keep).float()
    # log-softmax at the target alone: no second vocabulary-wide tensor
    return logits.gather(1, targets[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)


def kept_hidden(model: Any, input_ids: Any, mask: Any, keep: Any) -> Any:
    """The decoder's last hidden states at the kept positions of a right-padded batch.

    Where the rows open alike (a chat template's system prompt: the conditioned pass of IFD, the
    judges' prompts) and that saves ``decoding.SHARED_MIN`` token-rows, the opening runs once at
    one row, its keys and values are copied to every row, and then each row's rest runs, as the
    decoding loop's prefill does (engines/decoding.py); the same values up to the order of the
    products' sums. The opening ends before the first kept position of any row."""
    import torch

    from ptfactory.engines.decoding import cache_keyword, common_opening, open_once, shares_opening
    from ptfactory.engines.kv_cache import GrowingCache

    decoder = model.get_decoder()
    rows = len(input_ids)
    cache = GrowingCache(config=model.config)
    first_kept = int(keep.int().argmax(-1).min()) if rows else 0
    opening = 0
    if shares_opening(first_kept, rows, cache):  # the most it could share is enough: look closer
        texts = [ids[: int(n)].tolist() for ids, n in zip(input_ids, mask.sum(-1), strict=True)]
        opening = min(common_opening(texts), first_kept)
    if not shares_opening(opening, rows, cache):
        return decoder(input_ids=input_ids, attention_mask=mask).last_hidden_state[keep]
    keyword = cache_keyword(decoder.forward)

    def forward(ids: Any, ids_mask: Any, positions: Any) -> Any:
        return decoder(
            input_ids=ids, attention_mask=ids_mask, position_ids=positions, use_cache=True, **{keyword: cache}
        ).last_hidden_state

    open_once(forward, cache, input_ids[0, :opening], rows)
    width = input_ids.shape[1] - opening
    # the whole mask: the opening's positions and the rest's, right-padded as before
    positions = (opening + torch.arange(width, device=input_ids.device))[None].expand(rows, width)
    hidden = forward(input_ids[:, opening:], mask, positions)
    return hidden[keep[:, opening:]]


def head_logprobs(model: Any, hidden: Any, targets: Any) -> Any:
    """``log_softmax(head(hidden))[i, targets[i]]`` for each row, a slice of the head at a time:
    each slice's logits (soft-capped where the model's config says), the target's where it falls
    in the slice, and the log-sum-exp carried as a running maximum and a sum rescaled to it."""
    import torch

    head = model.get_output_embeddings()
    weight, bias = head.weight, head.bias
    rounded = in_bfloat16() and getattr(head, "weight_bf16", None) is not None  # engines/bf16_scoring.py
    if rounded:
        weight, hidden = head.weight_bf16, hidden.to(torch.bfloat16)
    cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
    rows = hidden.shape[0]
    best = hidden.new_full((rows,), float("-inf"), dtype=torch.float32)
    total = hidden.new_zeros((rows,), dtype=torch.float32)
    picked = hidden.new_zeros((rows,), dtype=torch.float32)
    for start in range(0, weight.shape[0], HEAD_CHUNK):
        end = min(start + HEAD_CHUNK, weight.shape[0])
        if rounded:  # bfloat16 products, read back as float32 (the bias added in float32)
            logits = torch.nn.functional.linear(hidden, weight[start:end]).float()
            logits = logits if bias is None else logits + bias[start:end]
        else:
            logits = torch.nn.functional.linear(
                hidden, weight[start:end], None if bias is None else bias[start:end]
            )
        logits = logits.float()
        if cap:
            logits = torch.tanh(logits / cap) * cap
        inside = ((targets >= start) & (targets < end)).nonzero()[:, 0]
        picked[inside] = logits[inside, targets[inside] - start]
        top = torch.maximum(best, logits.amax(dim=-1))
        total = total * torch.exp(best - top) + logits.sub_(top[:, None]).exp_().sum(dim=-1)
        best = top
    return picked - (best + total.log())


def sliced_head_fits(model: Any) -> bool:
    """Whether :func:`head_logprobs` on the decoder's hidden states gives the model's own
    log-probabilities: checked once per model on a short probe (a model whose forward does more
    after its head than Gemma's soft-capping, a logit scale say, keeps the whole-logits path)."""
    import torch

    known = getattr(model, "_ptf_sliced_head", None)
    if known is not None:
        return bool(known)
    fits = False
    try:
        vocab = vocab_width(model)
        ids = (torch.arange(3, 11) * 97 % vocab)[None, :].to(model.device)
        mask = torch.ones_like(ids)
        with torch.inference_mode():
            logits = model(input_ids=ids, attention_mask=mask).logits[0, :-1].float()
            want = torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]
            hidden = model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state[0, :-1]
            got = head_logprobs(model, hidden, ids[0, 1:])
        fits = bool(torch.allclose(got, want, atol=1e-4, rtol=0))
    except Exception:  # no get_decoder, another output: the whole-logits path, which always works
        fits = False
    model._ptf_sliced_head = fits
    return fits
