"""The JSON-schema constraint for the embedded engine's ``generate``, a per-row logits processor
(seeded sampling: :mod:`~ptfactory.engines.sampling`).

- :class:`JsonSchemaConstraint` masks every token the schema does not allow next (llguidance:
  3 MB, no dependencies; xgrammar pulls in triton, ~1 GB on a CPU box; lm-format-enforcer
  0.11 does not import with transformers 5; outlines-core builds a regex index for the vote
  schema's ``maxLength: 400`` that did not finish in minutes here). A row whose matcher has
  ended (EOS taken, or the row stopped and is fed padding) is left alone.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from ptfactory.errors import EngineError

__all__ = ["GrammarCache", "JsonSchemaConstraint"]


class GrammarCache:
    """One llguidance tokenizer per engine (building it takes ~1 s); grammars kept by the schema's
    JSON (a judge sends the same schema thousands of times)."""

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import llguidance
        import llguidance.hf

        self._tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
        self._grammars: dict[str, str] = {}
        self.vocab_size = vocab_size

    def grammar(self, schema: dict[str, Any]) -> str:
        from llguidance import LLMatcher

        # key order kept: the reply writes properties in the schema's order (a judge's score first)
        text = json.dumps(_closed(schema), separators=(",", ":"))
        if text not in self._grammars:
            # no free whitespace: a small model otherwise pads its JSON with newlines until cut
            grammar = LLMatcher.grammar_from_json_schema(text, defaults={"whitespace_flexible": False})
            probe = LLMatcher(self._tokenizer, grammar, log_level=0)
            if probe.is_error():
                raise EngineError(f"cannot constrain replies to this JSON schema: {probe.get_error()}")
            self._grammars[text] = grammar
        return self._grammars[text]

    def constraint(self, schema: dict[str, Any], rows: int) -> JsonSchemaConstraint:
        return JsonSchemaConstraint(self._tokenizer, self.grammar(schema), rows, self.vocab_size)


def _closed(schema: Any) -> Any:
    """The schema with ``additionalProperties: false`` wherever an object leaves it open: every
    reply still validates against the original, and a small model cannot invent keys until cut."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {k: _closed(v) for k, v in schema.items()}
    if "properties" in closed and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed


class JsonSchemaConstraint:
    """A transformers logits processor; one per ``generate`` call (its matchers hold state)."""

    def __init__(self, tokenizer: Any, grammar: str, rows: int, vocab_size: int) -> None:
        from llguidance import LLMatcher
        from llguidance.torch import allocate_token_bitmask

        self._matchers = [LLMatcher(tokenizer, grammar, log_level=0) for _ in range(rows)]
        self._live = [True] * rows
        self._bitmask = allocate_token_bitmask(rows, vocab_size)
        self._started = False

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        from llguidance.torch import apply_token_bitmask_inplace, fill_next_token_bitmask

        if self._started:
            for row, token in enumerate(input_ids[:, -1].tolist()):
                matcher = self._matchers[row]
                if self._live[row]:
                    # a refused token means the row ended (EOS taken, padding follows): free it
                    self._live[row] = bool(matcher.consume_token(token)) and not matcher.is_error()
        self._started = True
        self._bitmask.fill_(-1)  # every token allowed, for rows that are done
        for row, matcher in enumerate(self._matchers):
            if self._live[row]:  # a complete reply leaves EOS the only token allowed
                fill_next_token_bitmask(matcher, self._bitmask, row)
        masked = scores.to("cpu")
        apply_token_bitmask_inplace(masked, self._bitmask)
        return masked.to(scores.device)  # type: ignore[return-value]
