"""What each row of a ``generate`` batch does, as transformers' own extension points.

A batch of the transformers engine may hold requests of different settings
(``Engine.chat_many``): greedy and sampled rows, each sampled row with its own temperature, top-p
and seed, free rows and rows held to a JSON schema, each with its own token budget and stop
strings. transformers' ``generate`` runs the batch greedily (``do_sample=False``) and these
adapters, passed as its ``logits_processor`` and ``stopping_criteria``, do the rest per row:

- :class:`RowRules` (a ``LogitsProcessor``): a constrained row's logits are masked to what its
  grammar allows next (llguidance, one matcher per row); a sampled row's logits go through
  transformers' ``TemperatureLogitsWarper`` and ``TopPLogitsWarper``, then the row draws one token
  with ``torch.multinomial`` from its own ``torch.Generator`` (seeded from (seed, request),
  :func:`~ptfactory.engines.base.request_seeds`), and every other token is set to -inf, so
  ``generate``'s argmax takes the drawn one. A row's draws come from its generator alone: its text
  does not depend on the rows beside it (up to the float rounding a batch's padding brings).
  The nucleus (top-p) is looked for among the ``_HEAD`` most likely tokens first (a ``topk``; a
  sort of the whole vocabulary per row and step cost more than the model's own step at 8 rows);
  a row whose head holds less than ``top_p`` of the mass is sorted in full, so the nucleus is the
  same either way, and the draw is ``torch.multinomial`` over it.
- :class:`RowLimits` (a ``StoppingCriteria``): a row ends at its own ``max_tokens`` or when its
  text holds one of its stop strings.

A row whose matcher refuses a token or errs (it cannot, with the mask applied, but a grammar bug
must not end the batch) goes on unconstrained.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import LogitsProcessor, StoppingCriteria

__all__ = ["RowLimits", "RowRule", "RowRules", "nucleus_draws"]

_HEAD = 256  # tokens searched for the nucleus before a row is sorted in full


@dataclass(frozen=True)
class RowRule:
    """How one row picks: ``temperature`` <= 0 is greedy; ``grammar`` an llguidance grammar."""

    seed: int
    temperature: float
    top_p: float = 1.0
    grammar: str | None = None


class RowRules(LogitsProcessor):
    """Per-row grammar masks and seeded draws for ``generate`` (see the module docstring).

    ``prompt_width``: the batch's padded prompt length (the first call sees no generated token);
    ``grammars``: the engine's :class:`~ptfactory.engines.constrained.GrammarCache` (needed only
    when a rule has a grammar); ``ended``: token ids after which a row is over (EOS, padding)."""

    def __init__(
        self,
        rules: Sequence[RowRule],
        prompt_width: int,
        ended: Collection[int],
        grammars: Any = None,
        device: str = "cpu",
    ) -> None:
        self._rules = list(rules)
        self._width = prompt_width
        self._ended = set(ended)
        self._over = [False] * len(self._rules)
        self._generators = [
            torch.Generator(device=device).manual_seed(r.seed) if r.temperature > 0 else None
            for r in self._rules
        ]
        self._matchers: list[Any] = [grammars.matcher(r.grammar) if r.grammar else None for r in self._rules]
        self._bitmask: Any = None  # numpy int32 (rows x vocabulary/32)
        if any(m is not None for m in self._matchers):
            from llguidance.numpy import allocate_token_bitmask

            self._bitmask = allocate_token_bitmask(len(self._rules), grammars.vocab_size)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[1] > self._width:
            self._took([int(t) for t in input_ids[:, -1].tolist()])
        live = [i for i in range(len(self._rules)) if not self._over[i]]
        constrained = [i for i in live if self._matchers[i] is not None]
        out = scores.float() if scores.dtype != torch.float32 else scores.clone()
        if constrained:
            self._mask(out, constrained)
        groups: dict[tuple[float, float], list[int]] = {}
        for i in live:
            rule = self._rules[i]
            if rule.temperature > 0:
                groups.setdefault((rule.temperature, rule.top_p), []).append(i)
        for (temperature, top_p), rows in groups.items():
            index = torch.tensor(rows, device=out.device)
            probs = torch.softmax(out[index] / temperature, dim=-1)
            drawn = nucleus_draws(probs, top_p, [self._generators[i] for i in rows])
            picked = torch.full((len(rows), out.shape[-1]), float("-inf"), device=out.device)
            picked[torch.arange(len(rows), device=out.device), torch.tensor(drawn, device=out.device)] = 0.0
            out[index] = picked
        return out  # type: ignore[return-value]

    def _took(self, tokens: list[int]) -> None:
        """Each row's last token: a matcher consumes it; a row that ended is over."""
        for i, token in enumerate(tokens):
            if self._over[i]:
                continue
            if token in self._ended:
                self._over[i] = True
                continue
            matcher = self._matchers[i]
            if matcher is not None and (not matcher.consume_token(token) or matcher.is_error()):
                self._matchers[i] = None

    def _mask(self, logits: torch.Tensor, rows: list[int]) -> None:
        """Each constrained row's disallowed tokens at -inf, in place. llguidance's numpy path: its
        torch one is a ``torch.compile`` kernel, which compiles C++ with the machine's compiler on
        first use (tests/engines/test_adapters_only.py)."""
        from llguidance.numpy import apply_token_bitmask_inplace, fill_next_token_bitmask

        assert self._bitmask is not None
        bitmask = self._bitmask[: len(rows)]
        for slot, i in enumerate(rows):
            fill_next_token_bitmask(self._matchers[i], bitmask, slot)
        index = torch.tensor(rows, device=logits.device)
        masked = logits[index].to("cpu").contiguous()
        apply_token_bitmask_inplace(masked.numpy(), bitmask)  # the numpy view shares masked's memory
        logits[index] = masked.to(logits.device)


def nucleus_draws(
    probs: torch.Tensor, top_p: float, generators: Sequence[torch.Generator | None]
) -> list[int]:
    """One token per row of ``probs``, drawn by ``torch.multinomial`` from the row's generator
    over the row's nucleus: the most likely tokens whose mass first reaches ``top_p`` (the first
    always kept), renormalised; the whole row where ``top_p`` is 1."""
    if top_p >= 1.0:
        return [int(torch.multinomial(row, 1, generator=g)) for row, g in zip(probs, generators, strict=True)]
    heads, indices = probs.topk(min(_HEAD, probs.shape[-1]), dim=-1)
    drawn = []
    for row, top, where, generator in zip(probs, heads, indices, generators, strict=True):
        head, index = (top, where) if float(top.sum()) >= top_p else row.sort(descending=True)
        # (a flat distribution: the nucleus reaches past the head, sorted in full)
        kept = (head.cumsum(-1) - head) < top_p
        nucleus = head[kept]
        drawn.append(int(index[kept][torch.multinomial(nucleus / nucleus.sum(), 1, generator=generator)]))
    return drawn


class RowLimits(StoppingCriteria):
    """A row ends at its own ``max_tokens`` or once its text holds one of its stop strings."""

    def __init__(
        self, prompt_width: int, max_tokens: Sequence[int], stops: Sequence[Sequence[str]], tokenizer: Any
    ) -> None:
        self._width = prompt_width
        self._max = list(max_tokens)
        self._stops = [tuple(s) for s in stops]
        # the last tokens that can hold a stop string's characters
        self._tails = [4 * max((len(s) for s in row), default=0) + 4 for row in self._stops]
        self._tokenizer = tokenizer

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        generated = input_ids.shape[1] - self._width
        done = []
        for row, ids in enumerate(input_ids):
            if generated >= self._max[row]:
                done.append(True)
            elif self._stops[row] and generated > 0:
                tail = self._tokenizer.decode(
                    ids[-min(self._tails[row], generated) :], skip_special_tokens=True
                )
                done.append(any(stop in tail for stop in self._stops[row]))
            else:
                done.append(False)
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]
