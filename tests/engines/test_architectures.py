"""Any common architecture runs on the default engine (issue 40, item 4): tiny random checkpoints of
Llama 3 (``rope_type: llama3``), Qwen2, Qwen3, Mistral and Gemma 3 (sliding and full attention
layers, prompts longer than the window), Phi-3 and GPT-NeoX, built here with the fixture tokenizer (no hub), chat greedily, sampled and
JSON-constrained, and score exactly what one row alone through the model's own forward gives,
in batches with padding. The bundled Gemma 3 judge runs on it too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ptfactory.engines.base import SamplingParams
from ptfactory.engines.scoring import score_token_ids
from ptfactory.engines.spec import EngineSpec, build_engine
from ptfactory.engines.transformers_engine import TransformersEngine

SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
}
KINDS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama3": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            }
        },
    ),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 8}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {}),
    "gptneox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {}),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {"head_dim": 16, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]},
    ),
}
PROMPTS = [
    [{"role": "user", "content": "hello"}],
    [{"role": "user", "content": "write a python function that returns the sum of two numbers please"}],
    [{"role": "user", "content": "what is the capital of france?"}],
]
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import torch
    import transformers
    from transformers import AutoTokenizer

    from tests.models import build_tiny_model

    root = tmp_path_factory.mktemp("architectures")
    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model(root / "llama"))
    folders = {}
    for kind, (config_name, model_name, extra) in KINDS.items():
        config = getattr(transformers, config_name)(
            vocab_size=len(tokenizer),
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            **SHAPE,
            **extra,
        )
        torch.manual_seed(0)
        folder = root / kind
        getattr(transformers, model_name)(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[kind] = folder
    return folders


def _one_row_alone(engine: TransformersEngine, prompt: Any, continuation: str) -> list[float]:
    import torch

    model, tokenizer = engine._load()
    context, cont = score_token_ids(tokenizer, prompt, continuation)
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([context + cont])).logits[0].float()
    logprobs = torch.log_softmax(logits[len(context) - 1 : len(context) + len(cont) - 1], dim=-1)
    return [float(x) for x in logprobs.gather(1, torch.tensor(cont)[:, None])[:, 0]]


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_default_engine_generates_and_scores(kind: str, checkpoints: dict[str, Path]) -> None:
    engine = build_engine(EngineSpec(model=str(checkpoints[kind]), batch_size=3, threads=2), None)
    assert isinstance(engine, TransformersEngine)  # backend auto: the default engine
    model, _ = engine._load()
    if kind == "llama3":
        assert model.config.rope_parameters["rope_type"] == "llama3"
    if kind == "gemma3":
        assert model.config.layer_types == ["sliding_attention", "full_attention"]
    greedy = engine.chat(PROMPTS, SamplingParams(max_tokens=8, temperature=0))
    assert all(0 < g[0].completion_tokens <= 8 and g[0].prompt_tokens > 0 for g in greedy)
    sampled = engine.chat(PROMPTS, SamplingParams(n=2, max_tokens=8, temperature=1.0, seed=1))
    assert [len(g) for g in sampled] == [2, 2, 2] and len({c.text for g in sampled for c in g}) > 1
    for group in engine.chat(PROMPTS, SamplingParams(max_tokens=12, temperature=0.7, json_schema=SCHEMA)):
        if group[0].finish_reason == "stop":
            assert isinstance(json.loads(group[0].text)["ok"], bool)
    # prompts longer than Gemma's 8-token window, padded beside shorter ones
    conts = ["the quick brown fox jumps over the lazy dog", "sum", "paris is the capital of france"]
    for prompt, cont, scored in zip(PROMPTS, conts, engine.score(PROMPTS, conts), strict=True):
        want = _one_row_alone(engine, prompt, cont)
        assert len(scored.logprobs) == len(want) > 0
        assert max(abs(a - b) for a, b in zip(scored.logprobs, want, strict=True)) < 1e-4


@pytest.mark.slow
def test_the_bundled_gemma3_judge_scores_on_the_default_engine() -> None:
    """Gemma 3 270M (a base model: completion prompts, judged from its probabilities)."""
    engine = build_engine(EngineSpec(model="bundled:gemma3-270m", threads=2), None)
    assert isinstance(engine, TransformersEngine)
    prompt = "Question: What is the capital of France?\nAnswer: Paris.\nIs the answer right (Yes or No)?"
    (votes,) = engine.choice_logprobs([prompt], [" Yes", " No"])
    assert votes[0] > votes[1]
    right, wrong = engine.score(["The capital of France is"] * 2, [" Paris.", " Banana."])
    assert right.mean_nll < wrong.mean_nll
