"""Scoring's log-probabilities a slice of the vocabulary at a time (engines/kept_logits.py) equal
the log-softmax of the whole head's logits, and a model whose forward does more after its head
than the slices know keeps the whole-logits path."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from ptfactory.engines.kept_logits import HEAD_CHUNK, head_logprobs, kept_logprobs, sliced_head_fits
from tests.models import random_causal_lm

VOCAB = 3 * HEAD_CHUNK + 77  # several slices, the last one short


@pytest.mark.parametrize("cap", [None, 30.0])
@pytest.mark.parametrize("bias", [False, True])
def test_sliced_log_probabilities_equal_the_whole_heads(cap: float | None, bias: bool) -> None:
    torch.manual_seed(0)
    head = torch.nn.Linear(16, VOCAB, bias=bias)
    model = SimpleNamespace(
        get_output_embeddings=lambda: head,
        config=SimpleNamespace(get_text_config=lambda: SimpleNamespace(final_logit_softcapping=cap)),
    )
    hidden = torch.randn(40, 16) * 4
    targets = torch.randint(0, VOCAB, (40,))
    targets[:3] = torch.tensor([0, HEAD_CHUNK, VOCAB - 1])  # a slice's first and the last token
    with torch.inference_mode():
        logits = head(hidden)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        want = torch.log_softmax(logits, dim=-1).gather(1, targets[:, None])[:, 0]
        got = head_logprobs(model, hidden, targets)
    assert torch.allclose(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("kind", "config", "sliced"),
    [
        ("llama", {}, True),
        ("gemma3", {"num_key_value_heads": 1, "head_dim": 16, "final_logit_softcapping": 30.0}, True),
        ("granite", {"logits_scaling": 4.0}, False),  # its forward divides the head's logits
    ],
)
def test_scoring_gives_the_models_own_values_on_either_path(
    kind: str, config: dict[str, Any], sliced: bool
) -> None:
    torch.manual_seed(1)
    model = random_causal_lm(kind, VOCAB, **config)
    assert sliced_head_fits(model) is sliced
    ids = torch.randint(3, VOCAB, (3, 12))
    mask = torch.ones_like(ids)
    mask[1, 9:] = mask[2, 5:] = 0  # right padding
    keep = torch.zeros_like(ids, dtype=torch.bool)
    keep[0, 2:11] = keep[1, 4:8] = keep[2, 0:4] = True
    rows, cols = keep.nonzero(as_tuple=True)
    targets = ids[rows, cols + 1]
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask).logits.float()
        want = torch.log_softmax(logits[keep], dim=-1).gather(1, targets[:, None])[:, 0]
        got = kept_logprobs(model, ids, mask, keep, targets)
    assert torch.allclose(got, want, atol=1e-4, rtol=0)
