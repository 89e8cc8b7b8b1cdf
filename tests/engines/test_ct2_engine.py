"""The CTranslate2 backend (the embedded default) against transformers on the same weights: the tiny
random Llama for the contract, the bundled SmolLM2 for real."""

import os
from pathlib import Path

import pytest

from ptfactory.engines.base import SamplingParams
from ptfactory.engines.cache import ResponseCache
from ptfactory.engines.ct2_engine import CTranslate2Engine
from ptfactory.engines.ct2_models import ct2_model_dir
from ptfactory.engines.spec import EngineSpec, build_engine, resolved_backend
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.errors import EngineError
from tests.engines.test_batching import PROMPTS


@pytest.fixture(scope="module")
def engines(tiny_model: Path) -> tuple[CTranslate2Engine, TransformersEngine]:
    """One engine of each backend on the tiny model, shared by the module (loading is the cost)."""
    return (
        CTranslate2Engine(model_id="tiny", model_path=str(tiny_model), batch_size=8),
        TransformersEngine(model_id="tiny", model_path=str(tiny_model), batch_size=8),
    )


def test_greedy_chat_equals_transformers_with_counts_n_and_length(
    engines: tuple[CTranslate2Engine, TransformersEngine],
) -> None:
    ct2, hf = engines
    params = SamplingParams(n=2, max_tokens=7, temperature=0)
    ours, theirs = ct2.chat(PROMPTS, params), hf.chat(PROMPTS, params)
    assert [[c.text for c in g] for g in ours] == [[c.text for c in g] for g in theirs]
    for mine, ref in zip(ours, theirs, strict=True):
        assert len(mine) == 2 and mine[0].text == mine[1].text  # greedy: n copies of one text
        assert (mine[0].prompt_tokens, mine[0].completion_tokens) == (
            ref[0].prompt_tokens,
            ref[0].completion_tokens,
        )
        assert mine[0].finish_reason == ref[0].finish_reason
    assert any(g[0].finish_reason == "length" and g[0].completion_tokens == 7 for g in ours)
    assert ct2._delegate is None  # greedy never touched the transformers delegate


def test_stop_strings_end_the_reply(engines: tuple[CTranslate2Engine, TransformersEngine]) -> None:
    ct2, _ = engines
    (full,) = ct2.chat(PROMPTS[1:2], SamplingParams(max_tokens=24, temperature=0))[0]
    stop = full.text[3:5]  # a piece of what the model says anyway
    assert len(stop) == 2 and full.completion_tokens == 24
    (cut,) = ct2.chat(PROMPTS[1:2], SamplingParams(max_tokens=24, temperature=0, stop=(stop,)))[0]
    assert cut.finish_reason == "stop" and stop not in cut.text
    assert full.text.startswith(cut.text) and cut.completion_tokens < full.completion_tokens


def test_scores_and_choice_logprobs_match_transformers(
    engines: tuple[CTranslate2Engine, TransformersEngine],
) -> None:
    ct2, hf = engines
    conts = [f"the quick brown fox {'jumps ' * i}over" for i in range(len(PROMPTS))]
    prompts = [*PROMPTS[:-1], []]  # the last one unconditioned (IFD's second pass)
    for mine, ref in zip(ct2.score(prompts, conts), hf.score(prompts, conts), strict=True):
        assert mine.tokens == ref.tokens and len(mine.logprobs) > 4
        assert max(abs(a - b) for a, b in zip(mine.logprobs, ref.logprobs, strict=True)) < 1e-4
    choices = ["the", "fox", "data"]
    for mine_c, ref_c in zip(
        ct2.choice_logprobs(PROMPTS, choices), hf.choice_logprobs(PROMPTS, choices), strict=True
    ):
        assert max(abs(a - b) for a, b in zip(mine_c, ref_c, strict=True)) < 1e-4


def test_sampled_requests_keep_per_request_seeds_at_batch_1_and_8(tiny_model: Path) -> None:
    params = SamplingParams(n=2, max_tokens=8, temperature=1.0, seed=3)
    alone = CTranslate2Engine(model_id="tiny", model_path=str(tiny_model), batch_size=1, chunk_size=1)
    together = CTranslate2Engine(model_id="tiny", model_path=str(tiny_model), batch_size=8)
    one_by_one = [[c.text for c in g] for g in alone.chat(PROMPTS, params)]
    batched = [[c.text for c in g] for g in together.chat(PROMPTS, params)]
    assert one_by_one == batched
    assert len({t for g in batched for t in g}) > 8  # it did sample
    assert together._delegate is not None  # served by transformers: CTranslate2 cannot seed per request
    tool = {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}
    greedy = SamplingParams(max_tokens=4, temperature=0)
    with_tools = alone.chat(PROMPTS[:1], greedy, tools=[tool])
    assert with_tools == together._delegate.chat(
        PROMPTS[:1], greedy, tools=[tool]
    )  # rendered by its template


def test_cache_key_names_the_backend_and_compute_type(tiny_model: Path, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    params = SamplingParams(max_tokens=4, temperature=0)
    for engine in (
        CTranslate2Engine(model_id="tiny", model_path=str(tiny_model), cache=cache),
        CTranslate2Engine(model_id="tiny", model_path=str(tiny_model), cache=cache, dtype="int8"),
        TransformersEngine(model_id="tiny", model_path=str(tiny_model), cache=cache),
    ):
        engine.chat(PROMPTS[:2], params)
        assert (engine.stats.requests_sent, engine.stats.cache_hits) == (2, 0)  # none served another's
    identity = CTranslate2Engine(model_id="tiny", model_path=str(tiny_model)).cache_identity()
    assert "ctranslate2=" in identity and "float32" in identity
    with pytest.raises(EngineError, match="dtype 'float16'"):
        CTranslate2Engine(model_id="tiny", model_path=str(tiny_model), dtype="float16").cache_identity()


def test_auto_backend_is_transformers_and_ctranslate2_is_asked_for(tiny_model: Path) -> None:
    # auto: the default engine on every CPU and model (docs/engines.md); ctranslate2 when named
    assert resolved_backend(EngineSpec()) == "transformers"
    assert resolved_backend(EngineSpec(model="bundled:gemma3-270m")) == "transformers"
    assert resolved_backend(EngineSpec(model=str(tiny_model), backend="ctranslate2")) == "ctranslate2"
    assert isinstance(build_engine(EngineSpec(model=str(tiny_model)), None), TransformersEngine)
    assert isinstance(
        build_engine(EngineSpec(model=str(tiny_model), backend="ctranslate2"), None), CTranslate2Engine
    )
    with pytest.raises(EngineError, match="not 'some-org/model'"):
        CTranslate2Engine(model_id="x", model_path="some-org/model")._load()
    # converted but run wrongly there (past its sliding window, mixed-length batches): refused, saying why
    with pytest.raises(EngineError, match=r"sliding window.*use backend: transformers"):
        CTranslate2Engine(model_id="g", model_path="bundled:gemma3-270m").score(["Q:"], [" A"])


def test_an_interrupted_conversion_leaves_no_model(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctranslate2.converters

    monkeypatch.setenv("PTF_MODELS_DIR", str(tmp_path / "models"))
    real = ctranslate2.converters.TransformersConverter.convert

    def killed(self: object, output_dir: str, **kwargs: object) -> str:
        os.makedirs(output_dir, exist_ok=True)
        Path(output_dir, "model.bin").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(ctranslate2.converters.TransformersConverter, "convert", killed)
    with pytest.raises(KeyboardInterrupt):
        ct2_model_dir(str(tiny_model))
    assert not [p for p in (tmp_path / "models" / "ct2").glob("tiny-llama-*") if p.is_dir()]  # no model
    monkeypatch.setattr(ctranslate2.converters.TransformersConverter, "convert", real)
    folder = ct2_model_dir(str(tiny_model))
    assert (folder / "model.bin").stat().st_size > 1000
    assert [p.name for p in folder.parent.iterdir() if p.is_dir()] == [folder.name]  # the stale temp is gone
    assert ct2_model_dir(str(tiny_model)) == folder  # converted once


@pytest.mark.slow
def test_bundled_smollm2_on_ctranslate2_answers_and_scores_like_transformers() -> None:
    ct2 = CTranslate2Engine(model_id="SmolLM2-135M-Instruct", threads=2)
    hf = TransformersEngine(model_id="SmolLM2-135M-Instruct", threads=2)
    question = [[{"role": "user", "content": "What is the capital of France?"}]]
    params = SamplingParams(max_tokens=16, temperature=0)
    answer = ct2.chat(question, params)[0][0]
    assert "Paris" in answer.text and answer.text == hf.chat(question, params)[0][0].text
    conts = ["The capital of France is Paris.", "The capital of France is Banana."]
    right, wrong = ct2.score(question * 2, conts)
    assert right.mean_nll < wrong.mean_nll
    for mine, ref in zip((right, wrong), hf.score(question * 2, conts), strict=True):
        assert max(abs(a - b) for a, b in zip(mine.logprobs, ref.logprobs, strict=True)) < 1e-3


def test_new_weights_in_the_same_folder_get_a_new_conversion(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("PTF_MODELS_DIR", str(tmp_path / "models"))
    folder = tmp_path / "retrained"
    shutil.copytree(tiny_model, folder)
    first = ct2_model_dir(str(folder))
    assert ct2_model_dir(str(folder)) == first
    model = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01)
    model.save_pretrained(folder)  # a model retrained into the same output folder
    second = ct2_model_dir(str(folder))
    assert second != first and (second / "model.bin").read_bytes() != (first / "model.bin").read_bytes()
