"""Scoring's products with bfloat16 inputs (engines/bf16_scoring.py): inside the scoring block only,
generation kept apart, for models of bfloat16 values, and the bundled model's scores rank as
float32's do."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest
import torch
from scipy.stats import spearmanr

from ptfactory.engines import bf16_scoring
from ptfactory.engines.base import SamplingParams
from ptfactory.engines.bf16_scoring import (
    bfloat16_products,
    bfloat16_valued,
    float32_products,
    wants_bf16_scoring,
)
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.errors import EngineError


def _bf16_valued_linear(bf16_values: bool) -> torch.nn.Linear:
    torch.manual_seed(0)
    layer = torch.nn.Linear(96, 40)
    if bf16_values:
        with torch.no_grad():
            layer.weight.copy_(layer.weight.to(torch.bfloat16).float())
    return layer


def test_products_round_their_inputs_inside_the_block_alone() -> None:
    layer = _bf16_valued_linear(True)
    x = torch.randn(200, 96)
    rounded = torch.nn.functional.linear(x.bfloat16().double(), layer.weight.double(), layer.bias.double())
    setting = torch.backends.mkldnn.matmul
    before = setting.fp32_precision
    with torch.inference_mode():
        want = layer(x)
        with bfloat16_products():
            got = layer(x)
        with bfloat16_products(False):
            assert torch.equal(layer(x), want)
    assert setting.fp32_precision == before  # put back
    assert not torch.allclose(want.double(), rounded, atol=1e-4)  # float32 does not round the inputs
    assert torch.allclose(got.double(), rounded, atol=1e-4)  # bfloat16 inputs, float32 sums and outputs
    assert got.dtype == torch.float32


def test_generation_waits_while_another_thread_scores_in_bfloat16() -> None:
    setting = torch.backends.mkldnn.matmul
    scoring, release = threading.Event(), threading.Event()
    seen: list[str] = []

    def score() -> None:
        with bfloat16_products():
            scoring.set()
            release.wait(10)

    def generate() -> None:
        with float32_products():
            seen.append(setting.fp32_precision)

    scorer = threading.Thread(target=score)
    scorer.start()
    assert scoring.wait(10)
    generator = threading.Thread(target=generate)
    generator.start()
    generator.join(0.3)
    assert generator.is_alive() and not seen  # it waits for the scoring block to end
    release.set()
    scorer.join(10)
    generator.join(10)
    assert seen and seen[0] != "bf16"  # and then multiplies in float32


def test_only_models_of_bfloat16_values_qualify() -> None:
    assert bfloat16_valued(torch.nn.Sequential(_bf16_valued_linear(True), _bf16_valued_linear(True)))
    assert not bfloat16_valued(torch.nn.Sequential(_bf16_valued_linear(True), _bf16_valued_linear(False)))


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
        engine._load()
        assert engine._bf16_scoring is (dtype == "bfloat16")
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
