"""JSON-schema grammars for the embedded engine's constrained replies: one matcher per reply masks
every token the schema does not allow next (:mod:`~ptfactory.engines.processors`).

llguidance: 3 MB, no dependencies; xgrammar pulls in triton, ~1 GB on a CPU box;
lm-format-enforcer 0.11 does not import with transformers 5; outlines-core builds a regex index
for the vote schema's ``maxLength: 400`` that did not finish in minutes here.
"""

from __future__ import annotations

import json
from typing import Any

from ptfactory.errors import EngineError

__all__ = ["GrammarCache"]


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

    def matcher(self, grammar: str) -> Any:
        """A fresh matcher for one reply (it holds the reply's state)."""
        from llguidance import LLMatcher

        return LLMatcher(self._tokenizer, grammar, log_level=0)


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
