"""Seeded temperature and nucleus sampling for the transformers backend, one generator per row.

Each row draws from its own ``torch.Generator``, seeded from (seed, request)
(:func:`~ptfactory.engines.base.request_seeds`), so a request's sampled text does not depend on
which other requests share its batch, where it sits in it, or when its neighbours end. A row draws
exactly what ``torch.multinomial(probs, 1, generator=g)`` draws (torch's own one-sample path: a
vocabulary of exponential numbers from the row's generator, the token where probability over
exponential is largest), and the sampler before this engine's decoding loop drew with
``multinomial``: a request's text is the one earlier versions drew, the demo's included. The
exponential numbers are the cost, about 0.75 ms a row per token for SmolLM2's 49k-token vocabulary
on this box; the division and the pick run on the whole batch.

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
    """One token per row of ``scores`` (rows × vocabulary logits), row ``i`` drawing from
    ``generators[i]`` as ``torch.multinomial`` would from the row's nucleus distribution."""
    probs = torch.softmax(scores.float() / temperature, dim=-1)
    race = torch.empty_like(probs)
    for row, generator in zip(race, generators, strict=True):
        row.exponential_(1.0, generator=generator)
    if top_p >= 1.0:
        return (probs / race).argmax(dim=-1)
    ordered, index = probs.topk(min(_HEAD, probs.shape[-1]), dim=-1)
    flat = ordered.sum(dim=-1) <= top_p
    if not bool(flat.any()):
        return _nucleus(ordered, index, race, top_p)
    # the nucleus reaches past the head in these rows: sort them in full
    tokens = torch.empty(len(probs), dtype=torch.long, device=probs.device)
    wide, narrow = flat.nonzero().flatten(), (~flat).nonzero().flatten()
    full, full_index = probs[wide].sort(dim=-1, descending=True)
    tokens[wide] = _nucleus(full, full_index, race[wide], top_p)
    if len(narrow):
        tokens[narrow] = _nucleus(ordered[narrow], index[narrow], race[narrow], top_p)
    return tokens


def _nucleus(ordered: torch.Tensor, index: torch.Tensor, race: torch.Tensor, top_p: float) -> torch.Tensor:
    """The token of the smallest head of descending ``ordered`` whose mass reaches ``top_p`` (the
    first token always stays) where probability over the row's exponential number (``race``, by
    token id) is largest; ``index`` maps positions back to token ids."""
    kept = (ordered.cumsum(dim=-1) - ordered) <= top_p
    ratio = ordered * kept / race.gather(-1, index)
    return index.gather(-1, ratio.argmax(dim=-1, keepdim=True)).flatten()
