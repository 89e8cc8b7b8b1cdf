"""Each row's next token, when the rows of one batch pick differently.

A batch of the transformers engine may hold requests of different settings
(``Engine.chat_many``): greedy and sampled rows, each sampled row with its own temperature and
top-p, free rows and rows held to a JSON schema. Per step, the constrained rows' logits are masked
to what their grammar allows next (llguidance, one matcher per row), then every row picks: the
greedy ones by argmax, the sampled ones grouped by (temperature, top-p), each row drawing from its
own seeded generator (:func:`~ptfactory.engines.sampling.draw_tokens`).
Every operation is per row, so a row picks the token it would pick in a batch of its own kind.

A row whose matcher refuses a token or errs (it cannot, with the mask applied, but a grammar bug
must not end the batch) goes on unconstrained, as the former logits processor left it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ptfactory.engines.sampling import draw_tokens

__all__ = ["RowPicker", "RowRule"]


@dataclass(frozen=True)
class RowRule:
    """How one row picks: ``temperature`` <= 0 is greedy; ``grammar`` an llguidance grammar."""

    seed: int
    temperature: float
    top_p: float = 1.0
    grammar: str | None = None


class RowPicker:
    """``pick`` and ``keep`` for :func:`~ptfactory.engines.decoding.decode`.

    ``grammars``: the engine's :class:`~ptfactory.engines.constrained.GrammarCache` (needed only
    when a rule has a grammar)."""

    def __init__(self, rules: Sequence[RowRule], grammars: Any = None, device: str = "cpu") -> None:
        self._rules = list(rules)
        self._generators = [
            torch.Generator(device=device).manual_seed(r.seed) if r.temperature > 0 else None
            for r in self._rules
        ]
        self._matchers: list[Any] = [grammars.matcher(r.grammar) if r.grammar else None for r in self._rules]
        self._bitmask: torch.Tensor | None = None
        if any(m is not None for m in self._matchers):
            from llguidance.torch import allocate_token_bitmask

            self._bitmask = allocate_token_bitmask(len(self._rules), grammars.vocab_size)
        self._groups = self._grouped()

    def _grouped(self) -> dict[tuple[float, float], list[int]]:
        """The live rows by how they draw: greedy, or (temperature, top-p)."""
        groups: dict[tuple[float, float], list[int]] = {}
        for i, rule in enumerate(self._rules):
            key = (rule.temperature, rule.top_p) if rule.temperature > 0 else (0.0, 1.0)
            groups.setdefault(key, []).append(i)
        return groups

    def keep(self, rows: Sequence[int]) -> None:
        """Only these rows (indices into the current rows) go on: the others ended."""
        self._rules = [self._rules[i] for i in rows]
        self._generators = [self._generators[i] for i in rows]
        self._matchers = [self._matchers[i] for i in rows]
        self._groups = self._grouped()

    def pick(self, logits: torch.Tensor) -> torch.Tensor:
        """One token per row of ``logits`` (rows × vocabulary)."""
        constrained = [i for i, m in enumerate(self._matchers) if m is not None]
        if constrained:
            logits = self._mask(logits, constrained)
        if len(self._groups) == 1:  # the usual case: one kind of row, no gathering
            (((temperature, top_p), rows),) = self._groups.items()
            tokens = self._draw(logits, rows, temperature, top_p)
        else:
            tokens = torch.empty(len(logits), dtype=torch.long, device=logits.device)
            for (temperature, top_p), rows in self._groups.items():
                index = torch.tensor(rows, device=logits.device)
                tokens[index] = self._draw(logits[index], rows, temperature, top_p)
        for i in constrained:
            matcher = self._matchers[i]
            if not matcher.consume_token(int(tokens[i])) or matcher.is_error():
                self._matchers[i] = None
        return tokens

    def _draw(self, logits: torch.Tensor, rows: list[int], temperature: float, top_p: float) -> torch.Tensor:
        if temperature <= 0:
            return logits.argmax(dim=-1)
        generators = [g for g in (self._generators[i] for i in rows) if g is not None]
        return draw_tokens(logits, generators, temperature, top_p)

    def _mask(self, logits: torch.Tensor, rows: list[int]) -> torch.Tensor:
        """The logits with each constrained row's disallowed tokens at -inf."""
        from llguidance.torch import apply_token_bitmask_inplace, fill_next_token_bitmask

        assert self._bitmask is not None
        bitmask = self._bitmask[: len(rows)]
        for slot, i in enumerate(rows):
            fill_next_token_bitmask(self._matchers[i], bitmask, slot)
        index = torch.tensor(rows, device=logits.device)
        masked = logits[index].float().to("cpu")
        apply_token_bitmask_inplace(masked, bitmask)
        logits = logits.float().clone() if logits.dtype != torch.float32 else logits
        logits[index] = masked.to(logits.device)
        return logits
