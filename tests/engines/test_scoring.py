"""The token ids both local backends score a continuation on, with the tiny model's real tokenizer."""

from pathlib import Path
from typing import Any

import pytest

from ptfactory.engines.scoring import score_token_ids
from ptfactory.errors import EngineError

HELLO = [{"role": "user", "content": "hello"}]
CONTINUATION = "the quick brown fox"


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)


def test_with_a_prompt_the_context_is_the_chat_template_with_the_assistant_turn_open(tokenizer: Any) -> None:
    context, continuation = score_token_ids(tokenizer, HELLO, CONTINUATION)
    prefix = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.decode(context) == prefix
    assert context == tokenizer(prefix, add_special_tokens=False)["input_ids"]
    # the continuation starts exactly where the prefix ends: nothing merged across the boundary
    assert tokenizer.decode(context + continuation) == prefix + CONTINUATION
    assert [tokenizer.decode([t]) for t in continuation] == ["the", " quick", " brown", " fox"]


def test_without_a_prompt_the_context_is_the_bos_token(tokenizer: Any) -> None:
    context, continuation = score_token_ids(tokenizer, [], CONTINUATION)
    assert context == [tokenizer.bos_token_id]
    assert tokenizer.decode(context) == "<|im_start|>"
    assert continuation == score_token_ids(tokenizer, HELLO, CONTINUATION)[1]  # the prompt never leaks in


def test_without_a_prompt_or_bos_the_eos_token_starts_it(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)  # a copy to change
    tokenizer.bos_token = None
    assert score_token_ids(tokenizer, [], CONTINUATION)[0] == [tokenizer.eos_token_id]
    tokenizer.eos_token = None
    with pytest.raises(EngineError, match="neither a BOS nor an EOS token"):
        score_token_ids(tokenizer, [], CONTINUATION)


def test_an_empty_continuation_has_no_ids(tokenizer: Any) -> None:
    assert score_token_ids(tokenizer, HELLO, "")[1] == []
