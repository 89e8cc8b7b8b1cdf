"""The decoding loop's in-place KV cache gives the logits transformers' DynamicCache gives, bit for
bit, on a full-attention model and on one with sliding-window layers (Gemma 3's layout), through
the buffers' growth and rows leaving the batch."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import DynamicCache

from ptfactory.engines import kv_cache
from ptfactory.engines.decoding import decode
from ptfactory.engines.kv_cache import ROOM, GrowingCache
from tests.models import random_causal_lm


def _llama() -> Any:
    return random_causal_lm("llama", 300)


def _gemma3() -> Any:
    return random_causal_lm(
        "gemma3",
        300,
        num_hidden_layers=4,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=16,  # far shorter than the run: the window slides
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    )


def _run(
    model: Any, cache: type, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[torch.Tensor], list[list[int]]]:
    """decode() on a left-padded batch of 4, rows 1 and 3 stopped early, recording every logit."""
    torch.manual_seed(0)
    ids = torch.randint(3, 300, (4, 12))
    mask = torch.ones_like(ids)
    mask[1, :5] = mask[3, :2] = 0  # left padding
    seen: list[torch.Tensor] = []

    def pick(logits: torch.Tensor) -> torch.Tensor:
        seen.append(logits.clone())
        return logits.argmax(dim=-1)

    lengths = {1: 20, 3: ROOM + 10}  # row 1 leaves before the buffers grow, row 3 after
    monkeypatch.setattr(kv_cache, "GrowingCache", cache)
    with torch.inference_mode():
        out = decode(
            model,
            ids,
            mask,
            max_new_tokens=2 * ROOM + 20,  # past two rounds of growth
            pick=pick,
            eos=set(),
            stopped=lambda row, tokens: len(tokens) >= lengths.get(row, 10**6),
        )
    return seen, out


@pytest.mark.parametrize("build", [_llama, _gemma3], ids=["llama", "gemma3-sliding"])
def test_logits_equal_dynamic_caches_bit_for_bit(build: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(1)
    model = build()
    ours, our_tokens = _run(model, GrowingCache, monkeypatch)
    theirs, their_tokens = _run(model, DynamicCache, monkeypatch)
    assert our_tokens == their_tokens
    assert [len(t) for t in our_tokens] == [2 * ROOM + 20, 20, 2 * ROOM + 20, ROOM + 10]
    assert len(ours) == len(theirs)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_full_attention_layers_append_in_place_and_sliding_ones_stay_transformers() -> None:
    torch.manual_seed(1)
    model = _gemma3()
    cache = GrowingCache(config=model.config)
    kinds = [type(layer).__name__ for layer in cache.layers]
    assert kinds == ["DynamicSlidingWindowLayer", "_GrowingLayer"] * 2
    with torch.inference_mode():
        model(input_ids=torch.randint(3, 300, (2, 5)), use_cache=True, cache=cache)
        full = cache.layers[1]
        buffer = full._keys  # type: ignore[attr-defined]
        for _ in range(3):
            model(input_ids=torch.randint(3, 300, (2, 1)), use_cache=True, cache=cache)
    assert full._keys is buffer  # type: ignore[attr-defined]  # written into, not reallocated
    assert full.keys.shape[-2] == cache.get_seq_length() == 8
    assert full.keys.data_ptr() == buffer.data_ptr()  # attention reads a view of the buffer


def test_every_cache_edit_leaves_the_layer_as_transformers_would() -> None:
    """update, rows leaving, cropping, repeating and reordering rows, in turn, on both layers."""
    from transformers.cache_utils import DynamicLayer

    ours, theirs = GrowingCache().layer_class_to_replicate(), DynamicLayer()
    torch.manual_seed(0)

    def step(tokens: int, rows: int) -> None:
        keys, values = torch.randn(rows, 2, tokens, 4), torch.randn(rows, 2, tokens, 4)
        for layer in (ours, theirs):
            out = layer.update(keys, values)
        assert torch.equal(out[0], ours.keys) and torch.equal(out[1], ours.values)
        assert torch.equal(ours.keys, theirs.keys) and torch.equal(ours.values, theirs.values)

    step(5, 3)
    for _ in range(ROOM + 3):  # past the first buffer's room
        step(1, 3)
    for edit in (
        lambda layer: layer.batch_select_indices(torch.tensor([0, 2])),
        lambda layer: layer.crop(-4),
        lambda layer: layer.batch_repeat_interleave(2),
        lambda layer: layer.reorder_cache(torch.tensor([3, 2, 1, 0])),
    ):
        edit(ours)
        edit(theirs)
        assert ours.get_seq_length() == theirs.get_seq_length()
        step(1, 2 if ours.keys.shape[0] == 2 else 4)
    ours.crop(-ours.get_seq_length())
    theirs.crop(-theirs.get_seq_length())
    assert ours.get_seq_length() == theirs.get_seq_length() == 0
    step(2, 4)


def test_room_and_advance_append_as_update_does_across_growth() -> None:
    config = _llama().config
    written, updated = GrowingCache(config=config), GrowingCache(config=config)
    torch.manual_seed(1)
    first = torch.randn(3, 2, 5, 8), torch.randn(3, 2, 5, 8)
    written.layers[0].update(*first)
    updated.layers[0].update(*first)
    for step in range(ROOM + 3):  # past the buffers' room: they grow and keep what they held
        key, value = torch.randn(3, 2, 1, 8), torch.randn(3, 2, 1, 8)
        keys, values, length = written.layers[0].room(1)
        assert length == 5 + step and keys.shape[2] > length and keys.is_contiguous()
        keys[:, :, length], values[:, :, length] = key[:, :, 0], value[:, :, 0]
        written.layers[0].advance(1)
        want = updated.layers[0].update(key, value)
        assert torch.equal(written.layers[0].keys, want[0])
        assert torch.equal(written.layers[0].values, want[1])
    written.layers[0].batch_select_indices(torch.tensor([2, 0]))  # rows leave: room keeps working
    keys, _, length = written.layers[0].room(1)
    assert keys.shape[:2] == (2, 2) and length == 5 + ROOM + 3


def test_room_after_a_cache_edit_is_whole_buffers_holding_what_it_held() -> None:
    layer = GrowingCache(config=_llama().config).layers[0]
    layer.update(torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8))
    layer.crop(-2)  # transformers' edit (assisted decoding): the layer adopts a view of its buffer
    held = layer.keys.clone(), layer.values.clone()
    keys, values, length = layer.room(1)
    assert length == 4 and keys.shape[2] > 4 and keys.is_contiguous() and values.is_contiguous()
    assert torch.equal(keys[:, :, :4], held[0]) and torch.equal(values[:, :, :4], held[1])
