"""The Llama decoding step (engines/llama_step.py, llama_layer.c): transformers' logits up to the
order of float32 sums, and the same tokens, on the bundled SmolLM2 with packed weights, in the
decoding loop the engine runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from ptfactory.engines.base import SamplingParams
from ptfactory.engines.decoding import decode
from ptfactory.engines.kv_cache import ROOM
from ptfactory.engines.llama_step import LlamaStep, llama_step
from ptfactory.engines.packed_linear import ROWS, pack_linears
from ptfactory.engines.transformers_engine import TransformersEngine
from tests.engines.test_decoding import chat_batch
from tests.models import random_causal_lm

QUESTIONS = (
    "What is the capital of France?",
    "Write a python function that adds two numbers.",
    "Name three colours.",
    "Why is the sky blue? Answer in one sentence, please, for a child.",
    "List the first five prime numbers.",
)


# how far the step's logits may lie from transformers' (measured at a first step: SmolLM2 6e-5, its
# logits up to ~30; the random Llamas 1e-7, theirs ~0.1, where a wrong head or rotation moves them
# by 1e-4 or more)
LOGITS_APART = 1e-3
RANDOM_APART = 1e-5


def _apart(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape
    return float((a - b).abs().max())


@pytest.fixture(scope="module")
def engine(smollm2: Path) -> Any:
    engine = TransformersEngine(model_id="smollm2", model_path=str(smollm2), packed_weights=True, threads=2)
    engine._load()
    yield engine
    engine.close()


def _greedy_run(engine: Any, encoded: dict[str, torch.Tensor], step: Any, eos: set[int]) -> tuple[Any, Any]:
    seen: list[torch.Tensor] = []

    def pick(logits: torch.Tensor) -> torch.Tensor:
        seen.append(logits.clone())
        return logits.argmax(-1)

    with torch.inference_mode():
        tokens = decode(
            engine._model,
            encoded["input_ids"],
            encoded["attention_mask"],
            max_new_tokens=40,
            pick=pick,
            eos=eos,
            step=step,
        )
    return tokens, seen


@pytest.mark.parametrize(
    "questions",
    [QUESTIONS, QUESTIONS[:1], QUESTIONS[1:3] * 2],
    ids=["padded batch, rows ending apart", "one row, no padding", "repeated prompts"],
)
def test_the_step_computes_the_logits_transformers_computes(engine: Any, questions: tuple[str, ...]) -> None:
    assert isinstance(engine._step, LlamaStep)  # the engine took it
    encoded = chat_batch(engine._tokenizer, questions)
    # an early EOS (a common token) ends some rows before others: the cache loses rows mid-run
    eos = {*engine._eos(), engine._tokenizer.convert_tokens_to_ids(".")}
    fast_tokens, fast_logits = _greedy_run(engine, encoded, engine._step, eos)
    plain_tokens, plain_logits = _greedy_run(engine, encoded, None, eos)
    assert fast_tokens == plain_tokens
    assert len(fast_logits) == len(plain_logits) > 1
    for fast, plain in zip(fast_logits, plain_logits, strict=True):
        # float32 throughout, the sums in another order: logits run to ~30, apart by under 1e-3
        assert _apart(fast, plain) < LOGITS_APART
    if len(questions) > 1:
        assert len({len(t) for t in fast_tokens}) > 1  # rows did end apart


def test_the_engine_answers_as_without_the_step(engine: Any) -> None:
    prompts = [[{"role": "user", "content": q}] for q in QUESTIONS]
    greedy = SamplingParams(max_tokens=24, temperature=0.0, seed=0)
    sampled = SamplingParams(max_tokens=24, temperature=0.8, top_p=0.9, seed=3)
    step = engine._step
    with_step = [[c.text for c in g] for p in (greedy, sampled) for g in engine.chat(prompts, p)]
    engine._step = None
    try:
        without = [[c.text for c in g] for p in (greedy, sampled) for g in engine.chat(prompts, p)]
    finally:
        engine._step = step
    assert with_step == without
    assert all(all(texts) for texts in with_step)


def test_fused_weights_are_the_layers_own(engine: Any) -> None:
    attention, mlp = engine._model.model.layers[0].self_attn, engine._model.model.layers[0].mlp
    for group in ((attention.q_proj, attention.k_proj, attention.v_proj), (mlp.gate_proj, mlp.up_proj)):
        storages = {m.packed_bf16.untyped_storage().data_ptr() for m in group}
        assert len(storages) == 1  # views into one fused weight: no copy kept beside
    with torch.inference_mode():  # as the engine decodes
        assert engine._step.applies(ROWS) and not engine._step.applies(ROWS + 1)  # wider: torch's products
        assert not engine._step.applies(0)


def test_models_it_would_not_run_exactly_keep_their_forward(tiny_model: Path, smollm2: Path) -> None:
    tiny = TransformersEngine(model_id="tiny", model_path=str(tiny_model), packed_weights=True, threads=2)
    tiny._load()  # a float32 checkpoint: nothing packed
    assert tiny._step is None
    plain = TransformersEngine(model_id="smollm2", model_path=str(smollm2), packed_weights=False, threads=2)
    model, _ = plain._load()
    assert plain._step is None and llama_step(model) is None  # unpacked layers
    model.config._attn_implementation = "eager"
    assert llama_step(model) is None  # another attention: other sums
    plain.close()


def _packed_random_llama(**overrides: Any) -> Any:
    """A random Llama whose weights are bfloat16 values held in float32, its layers packed."""
    model = random_causal_lm("llama", 320, **overrides)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.copy_(module.weight.to(torch.bfloat16).float())
    assert pack_linears(model) == 2 * 7 + 1
    return model


@pytest.mark.parametrize(
    "overrides",
    [
        {"num_key_value_heads": 4},
        {"num_key_value_heads": 2},
        {"num_key_value_heads": 2, "tie_word_embeddings": True},
        {"num_key_value_heads": 4, "head_dim": 24},
    ],
    ids=["no GQA", "GQA, head_dim apart from hidden/heads", "GQA, tied head", "head_dim 24 (dot's tail)"],
)
def test_other_llama_shapes_get_transformers_logits(overrides: dict[str, Any]) -> None:
    # 4 heads of 16 (or 24) over a hidden size of 32
    model = _packed_random_llama(**{"head_dim": 16, **overrides})
    step = llama_step(model)
    assert step is not None
    torch.manual_seed(2)
    ids = torch.randint(3, 320, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, :4] = mask[2, :7] = 0  # left padding: the masked path; row 0 alone takes the other

    def run(use: Any, rows: slice) -> tuple[list[list[int]], list[torch.Tensor]]:
        seen: list[torch.Tensor] = []

        def pick(logits: torch.Tensor) -> torch.Tensor:
            seen.append(logits.clone())
            return logits.argmax(-1)

        with torch.inference_mode():
            # past the cache's room (ROOM): the step writes into grown buffers too
            tokens = decode(
                model, ids[rows], mask[rows], max_new_tokens=ROOM + 8, pick=pick, eos=set(), step=use
            )
        return tokens, seen

    for rows in (slice(None), slice(0, 1)):
        fast, plain = run(step, rows), run(None, rows)
        assert fast[0] == plain[0]
        assert max(_apart(a, b) for a, b in zip(fast[1], plain[1], strict=True)) < RANDOM_APART
    assert llama_step(model) is step  # made once: its weights are the layers' (fused once)


def test_llamas_it_would_not_run_exactly_get_no_step() -> None:
    rope = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    assert llama_step(_packed_random_llama(head_dim=16, rope_parameters=rope)) is None  # scaled positions
    assert llama_step(_packed_random_llama(head_dim=16, attention_bias=True)) is None
    assert llama_step(_packed_random_llama(head_dim=16, hidden_act="gelu")) is None
    # key and value projections of 2 heads of 8: 16 columns, not whole 32-column blocks to fuse
    assert llama_step(_packed_random_llama()) is None
    model = _packed_random_llama(head_dim=16)
    step = llama_step(model)
    assert step is not None
    with torch.inference_mode():
        assert step.applies(8)
    with torch.enable_grad():
        assert not step.applies(8)  # products with gradients take torch's matmul in the layers
