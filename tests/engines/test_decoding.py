"""The transformers backend's own decoding loop, on the bundled SmolLM2: rows leave the batch as
they end, and what each row generates is what transformers' ``generate`` gives it."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from ptfactory.engines.base import SamplingParams
from ptfactory.engines.decoding import decode
from ptfactory.engines.transformers_engine import TransformersEngine

# replies of very different lengths, so rows end at different steps; prompts of different
# lengths, so the batch is left-padded
PROMPTS = [
    "Reply with one word: yes or no. Is water wet?",
    "Name a colour.",
    "Write three sentences about the sea.",
    "List five fruits, one per line.",
    "What is 2 + 2? Answer with the number only.",
    "Explain in two sentences why the sky is blue, for a child who asked you at bedtime.",
]


def chat_batch(tokenizer: Any, prompts: Sequence[str]) -> Any:
    """``prompts`` as user turns through the chat template, one left-padded batch (the engine's
    tokenizer pads on the left)."""
    return tokenizer.apply_chat_template(
        [[{"role": "user", "content": p}] for p in prompts],
        add_generation_prompt=True,
        return_tensors="pt",
        padding=True,
        return_dict=True,
    )


def test_greedy_rows_equal_generate_and_ended_rows_leave_the_batch(smollm2: Path) -> None:
    engine = TransformersEngine(model_id="smollm2", model_path=str(smollm2), threads=2)
    model, tokenizer = engine._load()
    encoded = chat_batch(tokenizer, PROMPTS)
    eos = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    widths: list[int] = []

    def greedy(logits: torch.Tensor) -> torch.Tensor:
        widths.append(len(logits))
        return logits.argmax(dim=-1)

    with torch.inference_mode():
        ours = decode(
            model, encoded["input_ids"], encoded["attention_mask"], max_new_tokens=48, pick=greedy, eos=eos
        )
        theirs = model.generate(
            **encoded, max_new_tokens=48, do_sample=False, pad_token_id=tokenizer.pad_token_id
        )

    def cut(tokens: list[int]) -> list[int]:
        return tokens[: next((i for i, t in enumerate(tokens) if t in eos), len(tokens))]

    width = encoded["input_ids"].shape[1]
    assert [cut(t) for t in ours] == [cut(row[width:].tolist()) for row in theirs]
    lengths = sorted(len(t) for t in ours)
    assert lengths[0] < 10 and lengths[-1] == 48  # a short reply ended early, a long one ran on
    # the batch shrank as rows ended: later steps ran fewer rows than the first
    assert widths[0] == len(PROMPTS) and widths[-1] < len(PROMPTS) and widths == sorted(widths, reverse=True)


def test_sampled_replies_do_not_depend_on_the_batch_when_rows_end_early(smollm2: Path) -> None:
    params = SamplingParams(n=2, temperature=0.8, top_p=0.95, max_tokens=40, seed=5)
    conversations = [[{"role": "user", "content": p}] for p in PROMPTS]
    alone = TransformersEngine(model_id="smollm2", model_path=str(smollm2), batch_size=1, chunk_size=1)
    together = TransformersEngine(model_id="smollm2", model_path=str(smollm2), batch_size=8)
    one_by_one = alone.chat(conversations, params)
    batched = together.chat(conversations, params)
    assert [[c.text for c in g] for g in one_by_one] == [[c.text for c in g] for g in batched]
    finishes = {c.finish_reason for g in batched for c in g}
    assert finishes == {"stop", "length"}  # some rows ended before the others: the batch shrank


def test_a_stop_string_ends_its_row_and_cuts_the_text(smollm2: Path) -> None:
    engine = TransformersEngine(model_id="smollm2", model_path=str(smollm2))
    conversation = [{"role": "user", "content": "List five fruits, one per line."}]
    plain = engine.chat([conversation], SamplingParams(temperature=0, max_tokens=40))[0][0]
    first_line = plain.text.split("\n")[0]
    assert "\n" in plain.text and first_line
    cut = engine.chat([conversation], SamplingParams(temperature=0, max_tokens=40, stop=("\n",)))[0][0]
    assert (cut.text, cut.finish_reason) == (first_line, "stop")
    assert cut.completion_tokens < plain.completion_tokens  # it stopped generating there


def test_rows_sharing_a_prompt_are_prefilled_once_and_generate_as_copies_would(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptfactory.engines import decoding
    from ptfactory.engines.sampling import SeededSampler

    # both sides prefill whole (a shared opening would make the six copies' prefill differ in
    # its sums' order: tests/engines/test_shared_opening.py covers that)
    monkeypatch.setattr(decoding, "SHARED_MIN", 10**9)

    engine = TransformersEngine(model_id="smollm2", model_path=str(smollm2), threads=2)
    model, tokenizer = engine._load()
    encoded = chat_batch(tokenizer, PROMPTS[:3])
    expand = [0, 0, 1, 2, 2, 2]  # prompt 0 twice, prompt 2 three times
    eos = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    seeds = [5, 6, 7, 8, 9, 10]
    prefilled: list[int] = []
    forward = model.forward

    def counted(*args: object, **kwargs: object) -> object:
        ids = kwargs["input_ids"]
        assert isinstance(ids, torch.Tensor)
        if ids.shape[1] > 1:
            prefilled.append(len(ids))
        return forward(*args, **kwargs)

    def run(ids: torch.Tensor, mask: torch.Tensor, rows: list[int] | None) -> list[list[int]]:
        sampler = SeededSampler(seeds, 0.9, 0.95, "cpu")
        with torch.inference_mode():
            return decode(
                model,
                ids,
                mask,
                max_new_tokens=24,
                pick=sampler.draw,
                eos=eos,
                keep=sampler.keep,
                expand=rows,
            )

    model.forward = counted  # type: ignore[method-assign]
    try:
        shared = run(encoded["input_ids"], encoded["attention_mask"], expand)
        copies = run(encoded["input_ids"][expand], encoded["attention_mask"][expand], None)
    finally:
        del model.forward
    assert prefilled == [3, 6]  # three prompts prefilled for six rows, then six
    assert shared == copies
    assert shared[0] != shared[1]  # the copies sample apart (their own seeds)
