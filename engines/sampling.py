"""Seeded temperature and nucleus sampling for the transformers backend, one generator per row.

Each row draws from its own ``torch.Generator``, seeded from (seed, request)
(:func:`~ptfactory.engines.base.request_seeds`), so a request's sampled text does not depend on
which other requests share its batch, where it sits in it, or when its neighbours end. A row
takes exactly one uniform number from its generator per token and turns it into a token by the
inverse of its (nucleus) distribution, so the batch's work is a few tensor operations, not one
``multinomial`` per row.

The nucleus (top-p) is found among the ``_HEAD`` most likely tokens (``topk``, not a sort of the
whole vocabulary: that sort was a quarter of the demo's sampled generation time); a row whose head
holds less than ``top_p`` of the mass, a flat distribution, is sorted in full, so the result is the
nucleus either way.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["SeededSampler", "draw_tokens"]

_HEAD = 256  # tokens searched for the nucleus before a row falls back to a full sort


class SeededSampler:
    """Draws each row's next token; as a transformers logits processor (``__call__``) it returns
    logits with only the drawn token left, so greedy decoding after it takes exactly that token."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float, device: str) -> None:
        self._generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        self._temperature = temperature
        self._top_p = top_p

    def keep(self, rows: Sequence[int]) -> None:
        """Only these rows (indices into the current rows) go on: the others ended."""
        self._generators = [self._generators[i] for i in rows]

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        """One token per row of ``scores`` (rows × vocabulary logits)."""
        return draw_tokens(scores, self._generators, self._temperature, self._top_p)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        picked = self.draw(scores)
        out = torch.full_like(scores, float("-inf"))
        out[torch.arange(len(picked), device=scores.device), picked] = 0.0
        return out  # type: ignore[return-value]


def draw_tokens(
    scores: torch.Tensor, generators: Sequence[torch.Generator], temperature: float, top_p: float
) -> torch.Tensor:
    """One token per row of ``scores`` (rows × vocabulary logits), row ``i`` drawing its one
    uniform number from ``generators[i]``."""
    probs = torch.softmax(scores.float() / temperature, dim=-1)
    uniform = torch.cat([torch.rand(1, generator=g, device=g.device) for g in generators])
    if top_p >= 1.0:
        cumulative = probs.cumsum(dim=-1)
        return _inverse(cumulative, uniform * cumulative[:, -1]).clamp_(max=probs.shape[-1] - 1)
    ordered, index = probs.topk(min(_HEAD, probs.shape[-1]), dim=-1)
    flat = ordered.sum(dim=-1) <= top_p
    if not bool(flat.any()):
        return _nucleus(ordered, index, uniform, top_p)
    # the nucleus reaches past the head in these rows: sort them in full
    tokens = torch.empty(len(probs), dtype=torch.long, device=probs.device)
    wide, narrow = flat.nonzero().flatten(), (~flat).nonzero().flatten()
    full, full_index = probs[wide].sort(dim=-1, descending=True)
    tokens[wide] = _nucleus(full, full_index, uniform[wide], top_p)
    if len(narrow):
        tokens[narrow] = _nucleus(ordered[narrow], index[narrow], uniform[narrow], top_p)
    return tokens


def _nucleus(ordered: torch.Tensor, index: torch.Tensor, uniform: torch.Tensor, top_p: float) -> torch.Tensor:
    """Sample from the smallest head of descending ``ordered`` whose mass reaches ``top_p`` (the
    first token always stays); ``index`` maps positions back to token ids."""
    kept = (ordered.cumsum(dim=-1) - ordered) <= top_p
    masked = ordered * kept
    cumulative = masked.cumsum(dim=-1)
    position = _inverse(cumulative, uniform * cumulative[:, -1])
    # a draw at the very top of the mass lands past the last kept token: take that token
    position = torch.minimum(position, kept.sum(dim=-1) - 1)
    return index.gather(-1, position[:, None]).flatten()


def _inverse(cumulative: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per row, the first position whose cumulative mass exceeds ``target``."""
    return torch.searchsorted(cumulative, target[:, None], right=True).flatten()
