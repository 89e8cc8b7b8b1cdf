"""Scoring's wide products in bfloat16 (engines/bf16_scoring.py): inside the scoring block only, on
exact copies of bfloat16-valued weights, and the bundled model's scores rank as float32's do."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest
import torch
from scipy.stats import spearmanr

from ptfactory.engines import bf16_scoring
from ptfactory.engines.base import SamplingParams
from ptfactory.engines.bf16_scoring import bfloat16_products, keep_bfloat16_copies, wants_bf16_scoring
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.errors import EngineError


def _layer(bf16_values: bool, bias: bool = True) -> torch.nn.Linear:
    torch.manual_seed(0)
    layer = torch.nn.Linear(96, 40, bias=bias)
    if bf16_values:
        with torch.no_grad():
            layer.weight.copy_(layer.weight.to(torch.bfloat16).float())
    return layer


@pytest.mark.parametrize("bias", [False, True])
def test_products_run_in_bfloat16_inside_the_block_alone(bias: bool) -> None:
    layer, plain = _layer(True, bias), _layer(True, bias)
    assert keep_bfloat16_copies(layer) == 1
    x = torch.randn(3, 70, 96)
    with torch.inference_mode():
        want = plain(x)
        assert torch.equal(layer(x), want)  # outside the block: float32, unchanged
        with bfloat16_products():
            got = layer(x)
            seen_elsewhere: list[torch.Tensor] = []
            other = threading.Thread(target=lambda: seen_elsewhere.append(layer(x)))
            other.start()
            other.join()
        rounded = torch.nn.functional.linear(x.bfloat16(), plain.weight.bfloat16()).float()
        assert torch.equal(got, rounded if plain.bias is None else rounded + plain.bias)
        assert got.dtype == torch.float32 and not torch.equal(got, want)  # it did round
        assert torch.allclose(got, want, rtol=0.05, atol=0.05)
        assert torch.equal(seen_elsewhere[0], want)  # another thread's products stay float32
        with bfloat16_products(False):
            assert torch.equal(layer(x), want)
    with bfloat16_products():  # a gradient wanted: float32, as training needs
        assert torch.equal(layer(x), plain(x))


def test_a_layer_bfloat16_would_round_keeps_float32() -> None:
    layer = _layer(False)
    assert keep_bfloat16_copies(layer) == 0
    assert not hasattr(layer, "weight_bf16")


def test_the_setting_decides_and_auto_asks_for_bfloat16_units(monkeypatch: pytest.MonkeyPatch) -> None:
    assert wants_bf16_scoring("cpu", "float32", "bfloat16")
    assert not wants_bf16_scoring("cpu", "float32", "float32")
    assert not wants_bf16_scoring("cpu", "bfloat16", "bfloat16")  # a bfloat16 model is there already
    monkeypatch.setattr(bf16_scoring, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
    assert not wants_bf16_scoring("cpu", "float32")
    monkeypatch.setattr(bf16_scoring, "cpu_flags", lambda: frozenset({"avx512f", "amx_bf16"}))
    assert wants_bf16_scoring("cpu", "float32")
    assert not wants_bf16_scoring("cuda", "float32")
    with pytest.raises(EngineError, match="on device 'cuda' give the model dtype: bfloat16"):
        wants_bf16_scoring("cuda", "float32", "bfloat16")
    with pytest.raises(EngineError, match="score_dtype 'fp8' is not one of auto, float32, bfloat16"):
        wants_bf16_scoring("cpu", "float32", "fp8")


ROWS = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("Write a python function that adds two numbers.", "def add(a, b):\n    return a + b"),
    ("Name three colours.", "Red, green and blue."),
    ("Why is the sky blue?", "Sunlight scatters off air molecules, blue light the most."),
    ("What is 7 times 8?", "56."),
    ("Who wrote Hamlet?", "William Shakespeare wrote Hamlet."),
    ("Describe a dog in one sentence.", "A dog is a loyal animal that barks."),
    ("Translate 'thank you' into French.", "Merci."),
    ("What is the boiling point of water?", "100 degrees Celsius at sea level."),
    ("Give an antonym of cold.", "Hot."),
    ("What is the capital of France?", "Bananas are yellow and grow in bunches."),
    ("Write a python function that adds two numbers.", "The weather is nice today."),
]


def test_the_bundled_model_scores_in_bfloat16_as_float32_ranks_them(smollm2: Path) -> None:
    questions = [[{"role": "user", "content": q}] for q, _ in ROWS]
    answers = [a for _, a in ROWS]
    ifd, logprobs, choices, texts = {}, {}, {}, {}
    for dtype in ("bfloat16", "float32"):
        engine = TransformersEngine(model_id="smollm2", model_path=str(smollm2), score_dtype=dtype, threads=2)
        model, _ = engine._load()
        assert engine._bf16_scoring is (dtype == "bfloat16")
        assert hasattr(model.get_output_embeddings(), "weight_bf16") is (dtype == "bfloat16")
        assert ("score=bf16" in engine.engine_version()) is (dtype == "bfloat16")  # cache keys differ
        cond, free = engine.score(questions, answers), engine.score([[] for _ in ROWS], answers)
        ifd[dtype] = [math.exp(c.mean_nll - f.mean_nll) for c, f in zip(cond, free, strict=True)]
        logprobs[dtype] = [x for c in cond for x in c.logprobs]
        choices[dtype] = engine.choice_logprobs(questions[:4], ["1", "2", "3"])
        texts[dtype] = [
            g[0].text
            for g in engine.chat(questions[:3], SamplingParams(max_tokens=16, temperature=0.0, seed=0))
        ]
        engine.close()
    assert spearmanr(ifd["bfloat16"], ifd["float32"]).statistic >= 0.95
    assert ifd["bfloat16"] != ifd["float32"]  # bfloat16 products did run
    gaps = [abs(a - b) for a, b in zip(logprobs["bfloat16"], logprobs["float32"], strict=True)]
    assert sum(gaps) / len(gaps) < 0.08 and max(gaps) < 0.5
    for mine, ref in zip(choices["bfloat16"], choices["float32"], strict=True):
        assert max(abs(a - b) for a, b in zip(mine, ref, strict=True)) < 0.2
    assert texts["bfloat16"] == texts["float32"]  # generation never takes bfloat16 products


def test_a_float32_checkpoint_keeps_float32_scoring(tiny_model: Path) -> None:
    # the tests' tiny model is saved in float32: bfloat16 inputs would meet weights bfloat16 rounds
    engine = TransformersEngine(
        model_id="tiny", model_path=str(tiny_model), score_dtype="bfloat16", threads=2
    )
    engine._load()
    assert not engine._bf16_scoring
