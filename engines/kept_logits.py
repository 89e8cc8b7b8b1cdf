"""The transformers backend's vocabulary head: what scoring reads of it (the kept positions'
logits, a continuation's, not the prompt's), batches cut so those logits fit a budget, and on a
CPU the head's matmul cut into slices of the vocabulary (:func:`chunk_head`).

On Gemma 3 the head (262k tokens wide) is most of a small model's work, and a batch of long
continuations would otherwise hold gigabytes of logits at once.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["HEAD_CHUNK", "LOGIT_FLOATS", "chunk_head", "kept_logits", "score_batches", "vocab_width"]


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
