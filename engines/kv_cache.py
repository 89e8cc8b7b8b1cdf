"""A KV cache for the decoding loop that appends a step's keys and values in place.

transformers' ``DynamicCache`` concatenates each layer's whole cache with the step's new keys and
values, every step: at 32 rows and a few hundred tokens that copy is a large share of a decoding
step (15 % of the time of the demo's sampled answers, 32 rows and up to 256 tokens, on 2 cores). :class:`GrowingCache` keeps each
full-attention layer's keys and values in a buffer with room for ``ROOM`` more tokens, writes a
step into it, and hands attention a view of the filled part: the same numbers, so the same logits
(tested bit for bit). Sliding-window layers (Gemma 3's local ones) stay transformers' own.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

__all__ = ["ROOM", "GrowingCache"]

ROOM = 128  # tokens of room a buffer gains when it fills: a copy every 128 steps, not every step


class _GrowingLayer(DynamicLayer):  # type: ignore[no-untyped-call]  # transformers' hooks are untyped
    """A full-attention layer's cache in buffers ``[rows, heads, capacity, head_dim]``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None
        self._length = 0

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, end = self._length, self._length + key_states.shape[-2]
        if self._keys is None or end > self._keys.shape[-2]:
            self._keys = self._grown(self._keys, key_states, end)
            self._values = self._grown(self._values, value_states, end)
        assert self._values is not None
        self._keys[:, :, start:end] = key_states
        self._values[:, :, start:end] = value_states
        self._length = end
        self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
        return self.keys, self.values

    def room(self, tokens: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The buffers with room for ``tokens`` more, and how many they hold: a caller writes the
        next tokens' keys and values at that position, then calls :meth:`advance`
        (engines/llama_step.py writes them from C). Only once the layer holds some."""
        assert self._keys is not None and self._values is not None and self._length
        end = self._length + tokens
        # a writer reads them as whole buffers (rows x heads x capacity x dim): a view left by a
        # cache edit (_adopt) is copied into one
        if end > self._keys.shape[-2] or not (self._keys.is_contiguous() and self._values.is_contiguous()):
            self._keys = self._grown(self._keys, self._keys[:, :, :0], end)
            self._values = self._grown(self._values, self._values[:, :, :0], end)
        return self._keys, self._values, self._length

    def advance(self, tokens: int) -> None:
        """``tokens`` more written into the buffers' room (:meth:`room`)."""
        assert self._keys is not None and self._values is not None
        self._length += tokens
        self.keys, self.values = self._keys[:, :, : self._length], self._values[:, :, : self._length]

    def _grown(self, buffer: torch.Tensor | None, states: torch.Tensor, length: int) -> torch.Tensor:
        rows, heads, _, dim = states.shape
        grown = states.new_empty(rows, heads, length + ROOM, dim)
        if buffer is not None and self._length:
            grown[:, :, : self._length] = buffer[:, :, : self._length]
        return grown

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows ``indices`` (rows that ended leave the batch), with the buffers' room."""
        if self._keys is not None and self._values is not None and self._length:
            # index_select copies whole rows; indexing (aten::index) gathered them at ~1 GB/s, a
            # quarter of a shared opening's prefill (engines/decoding.py)
            self._keys, self._values = (
                self._keys.index_select(0, indices),
                self._values.index_select(0, indices),
            )
            self.keys, self.values = self._keys[:, :, : self._length], self._values[:, :, : self._length]

    # transformers' other cache edits (beam search, cropping for assisted decoding) work on
    # ``keys`` and ``values`` as DynamicLayer does; the buffers then restart from their result
    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        self._adopt()

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self._adopt()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        super().reorder_cache(beam_idx)
        self._adopt()

    def reset(self) -> None:
        super().reset()
        self._keys = self._values = None
        self._length = 0

    def _adopt(self) -> None:
        keys = self.keys
        length = keys.shape[-2] if keys is not None and keys.dim() == 4 else 0
        self._keys, self._values = (keys, self.values) if length else (None, None)
        self._length = length


class GrowingCache(DynamicCache):
    """``DynamicCache`` whose full-attention layers append in place (:class:`_GrowingLayer`)."""

    def __init__(self, config: Any = None) -> None:
        super().__init__(config=config)
        self.layers = [_GrowingLayer() if type(layer) is DynamicLayer else layer for layer in self.layers]
        if self.layer_class_to_replicate is DynamicLayer:  # no config: layers are added as used
            self.layer_class_to_replicate = _GrowingLayer

    @property
    def keeps_everything(self) -> bool:
        """Whether every layer keeps all its keys and values (none drops old ones, as a sliding
        window's does, counting cache slots)."""
        return all(isinstance(layer, _GrowingLayer) for layer in self.layers)
