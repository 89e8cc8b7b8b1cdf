"""What the transformers backend's scoring reads of the vocabulary head: the kept positions'
logits (a continuation's, not the prompt's), and batches cut so those logits fit a budget.

On Gemma 3 the head (262k tokens wide) is most of a small model's work, and a batch of long
continuations would otherwise hold gigabytes of logits at once.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["LOGIT_FLOATS", "kept_logits", "score_batches", "vocab_width"]


# Logits held at once by ``_score`` (512 MB of float32): Gemma 3's vocabulary is 262k wide, so a
# batch is cut where its continuations' tokens times the vocabulary would pass this.
LOGIT_FLOATS = 128 * 1024 * 1024


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
