"""Prompts that open alike (a chat template's system prompt) prefill that opening once
(engines/decoding.py, ``_prefill``): each row then generates what it generates with the batch
prefilled whole, on the bundled SmolLM2 and on random models; scoring runs it once too
(engines/kept_logits.py, ``kept_hidden``)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import torch

from ptfactory.engines import decoding
from ptfactory.engines.decoding import common_opening, decode
from ptfactory.engines.scoring import score_token_ids
from ptfactory.engines.transformers_engine import TransformersEngine
from tests.engines.test_decoding import chat_batch
from tests.engines.test_kv_cache import _gemma3, _llama

PROMPTS = [
    "Reply with one word: yes or no. Is water wet?",
    "Name a colour.",
    "Write three sentences about the sea.",
    "What is 2 + 2? Answer with the number only.",
    "Explain in two sentences why the sky is blue, for a child who asked you at bedtime.",
]


def test_thecommon_opening_leaves_every_prompt_its_last_token() -> None:
    assert common_opening([[1, 2, 3, 4], [1, 2, 3, 5, 6], [1, 2, 9]]) == 2
    assert common_opening([[1, 2, 3], [1, 2, 3]]) == 2  # alike to the end: the last token stays
    assert common_opening([[1, 2, 3], [1, 2, 3, 4]]) == 2  # one a prefix of another
    assert common_opening([[7, 2], [1, 2]]) == 0
    assert common_opening([[5], [5, 6]]) == 0
    assert common_opening([[1, 2, 3]]) == 2


def _decode(
    model: Any, ids: torch.Tensor, mask: torch.Tensor, **kwargs: Any
) -> tuple[list[list[int]], list[Any]]:
    seen: list[torch.Tensor] = []

    def pick(logits: torch.Tensor) -> torch.Tensor:
        seen.append(logits.clone())
        return logits.argmax(dim=-1)

    with torch.inference_mode():
        return decode(model, ids, mask, pick=pick, **kwargs), seen


def _prefill_widths(model: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(rows, tokens) of every forward pass of more than one token, recorded as decode runs."""
    widths: list[tuple[int, int]] = []
    forward = model.forward

    def counted(*args: Any, **kwargs: Any) -> Any:
        if kwargs["input_ids"].shape[1] > 1:
            widths.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", counted)
    return widths


def test_the_bundled_model_prefills_the_system_prompt_once_and_answers_as_before(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = TransformersEngine(model_id="smollm2", model_path=str(smollm2), threads=2)
    model, tokenizer = engine._load()
    encoded = chat_batch(tokenizer, PROMPTS)
    ids, mask = encoded["input_ids"], encoded["attention_mask"]
    texts = [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]
    opening = common_opening(texts)
    assert opening >= 20  # the template's system prompt and the user turn's start
    eos = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    settings = {"max_new_tokens": 40, "eos": eos, "step": engine._step}
    widths = _prefill_widths(model, monkeypatch)
    shared, shared_logits = _decode(model, ids, mask, **settings)
    assert widths == [(1, opening), (len(PROMPTS), ids.shape[1] - opening)]
    monkeypatch.setattr(decoding, "SHARED_MIN", 10**9)  # the whole batch in one pass, as before
    whole, whole_logits = _decode(model, ids, mask, **settings)
    assert widths[2:] == [tuple(ids.shape)]
    assert shared == whole
    assert len({len(t) for t in whole}) > 1  # rows ended apart
    for a, b in zip(shared_logits, whole_logits, strict=True):
        # the same logits up to the order of the products' sums (as between batch sizes)
        torch.testing.assert_close(a, b, atol=2e-3, rtol=0)


def test_a_random_model_sees_the_same_context_with_the_padding_in_the_middle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _llama()
    torch.manual_seed(1)
    opening = torch.randint(3, 300, (30,))
    rests = [torch.randint(3, 300, (n,)) for n in (5, 1, 12, 8)]
    width = 30 + max(len(r) for r in rests)
    ids = torch.zeros(len(rests), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, rest in enumerate(rests):  # left-padded, as the engine encodes
        text = torch.cat([opening, rest])
        ids[row, width - len(text) :], mask[row, width - len(text) :] = text, 1
    widths = _prefill_widths(model, monkeypatch)
    shared, shared_logits = _decode(model, ids, mask, max_new_tokens=20, eos=set())
    assert widths[0] == (1, 30)  # the opening once
    monkeypatch.setattr(decoding, "SHARED_MIN", 10**9)
    whole, whole_logits = _decode(model, ids, mask, max_new_tokens=20, eos=set())
    assert shared == whole
    for a, b in zip(shared_logits, whole_logits, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_a_sliding_window_model_prefills_its_batch_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _gemma3()  # its window counts cache slots, padding included
    ids = torch.cat([torch.full((3, 40), 7), torch.tensor([[4], [5], [6]])], dim=1)
    widths = _prefill_widths(model, monkeypatch)
    _decode(model, ids, torch.ones_like(ids), max_new_tokens=3, eos=set())
    assert widths == [(3, 41)]


def test_scoring_runs_the_shared_opening_once_with_the_same_logprobs(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # float32 scoring: the reference values (bfloat16 scoring rounds each product alike)
    engine = TransformersEngine(model_id="smollm2", model_path=str(smollm2), threads=2, score_dtype="float32")
    model, _ = engine._load()
    decoder = model.get_decoder()
    widths: list[tuple[int, int]] = []
    forward = decoder.forward

    @functools.wraps(forward)  # its signature: kept_hidden names the cache argument from it
    def counted(*args: Any, **kwargs: Any) -> Any:
        widths.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    monkeypatch.setattr(decoder, "forward", counted)
    prompts = [[{"role": "user", "content": p}] for p in PROMPTS]
    answers = ["No.", "Blue.", "The sea is wide. It is deep. It is blue.", "4", "Light scatters."]
    # the same question, answers opening alike: the opening stops at the first scored position
    prompts += [[{"role": "user", "content": "Describe the sea."}]] * 3
    answers += ["The sea is wide.", "The sea is deep.", "The sky is blue."]
    engine.score_batch_size = len(PROMPTS) + 3
    engine._score(prompts[:1], answers[:1])  # the head's probe (kept_logits.sliced_head_fits) once
    widths.clear()
    shared = engine._score(prompts, answers)
    assert [w[0] for w in widths] == [1, len(prompts)] and widths[0][1] >= 20  # the opening, then the rests
    monkeypatch.setattr(decoding, "SHARED_MIN", 10**9)
    whole = engine._score(prompts, answers)
    assert [w[0] for w in widths[2:]] == [len(prompts)]
    for a, b in zip(shared, whole, strict=True):
        assert a.tokens == b.tokens
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)
    # alone, the three rows share their whole context and their answers' first tokens: the
    # opening stops just before the first scored position (the context's last token)
    context, _ = score_token_ids(engine._tokenizer, prompts[-1], answers[-1])
    whole_alone = engine._score(prompts[-3:], answers[-3:])
    monkeypatch.setattr(decoding, "SHARED_MIN", 64)
    widths.clear()
    shared_alone = engine._score(prompts[-3:], answers[-3:])
    assert widths[0] == (1, len(context) - 1)
    for a, b in zip(shared_alone, whole_alone, strict=True):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)
    engine.close()
