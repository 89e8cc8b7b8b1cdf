"""Batch composition changes nothing: per-request seeds, length-sorted batches, batched scoring,
and cache keys that name the backend, quantization and engine version."""

from pathlib import Path

from ptfactory.engines.base import SamplingParams, request_seeds
from ptfactory.engines.cache import ResponseCache
from ptfactory.engines.transformers_engine import TransformersEngine

PROMPTS = [
    [{"role": "user", "content": text}]
    for text in (
        "hello",
        "write a python function that returns the sum of two numbers",
        "what is the capital of france?",
        "the quick brown fox jumps over the lazy dog and then what",
        "data factory",
        "judge this answer: paris is the capital of france. is it right?",
        "dedup the shard",
        "sum",
    )
]


def test_sampled_outputs_do_not_depend_on_the_batch(tiny_model: Path) -> None:
    params = SamplingParams(n=2, max_tokens=8, temperature=1.0, seed=3)
    alone = TransformersEngine(model_id="tiny", model_path=str(tiny_model), batch_size=1, chunk_size=1)
    together = TransformersEngine(model_id="tiny", model_path=str(tiny_model), batch_size=8)
    one_by_one = [[c.text for c in g] for g in alone.chat(PROMPTS, params)]
    batched = [[c.text for c in g] for g in together.chat(PROMPTS, params)]
    reversed_batch = [[c.text for c in g] for g in together.chat(PROMPTS[::-1], params)][::-1]
    assert one_by_one == batched == reversed_batch
    assert alone.stats.requests_sent == 8 and together.stats.requests_sent == 16  # no cache: sent twice
    assert len({t for g in batched for t in g}) > 8  # it did sample: the texts differ
    other_seed = together.chat(PROMPTS, SamplingParams(n=2, max_tokens=8, temperature=1.0, seed=4))
    assert [[c.text for c in g] for g in other_seed] != batched


def test_request_seeds_differ_per_request_and_sample() -> None:
    params = SamplingParams(n=3, seed=1)
    first, second = request_seeds(params, PROMPTS[0]), request_seeds(params, PROMPTS[1])
    assert len(set(first + second)) == 6
    assert request_seeds(params, PROMPTS[0]) == first
    assert request_seeds(SamplingParams(n=2, seed=1), PROMPTS[0]) == first[:2]
    assert request_seeds(SamplingParams(n=3, seed=2), PROMPTS[0]) != first


def test_batched_scores_equal_one_at_a_time(tiny_model: Path) -> None:
    conts = [f"the quick brown fox {'jumps ' * i}over" for i in range(len(PROMPTS))]
    alone = TransformersEngine(model_id="tiny", model_path=str(tiny_model), batch_size=1)
    together = TransformersEngine(model_id="tiny", model_path=str(tiny_model), batch_size=8)
    single = alone.score(PROMPTS, conts)
    batched = together.score(PROMPTS, conts)
    for a, b in zip(single, batched, strict=True):
        assert a.tokens == b.tokens and len(a.logprobs) > 4
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4
    assert batched[0].logprobs != batched[1].logprobs  # the prompt conditions the continuation


def test_cache_key_names_backend_quantization_and_version(tiny_model: Path, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    params = SamplingParams(max_tokens=4, temperature=0)
    fp32 = TransformersEngine(model_id="tiny", model_path=str(tiny_model), cache=cache)
    fp32.chat(PROMPTS[:2], params)
    bf16 = TransformersEngine(model_id="tiny", model_path=str(tiny_model), cache=cache, dtype="bfloat16")
    bf16.chat(PROMPTS[:2], params)
    assert (bf16.stats.requests_sent, bf16.stats.cache_hits) == (2, 0)  # another quantization
    again = TransformersEngine(model_id="tiny", model_path=str(tiny_model), cache=cache)
    again.chat(PROMPTS[:2], params)
    assert (again.stats.requests_sent, again.stats.cache_hits) == (0, 2)
    identity = fp32.cache_identity()
    assert "transformers" in identity and "float32" in identity and "torch=" in identity


def test_a_model_retrained_in_its_folder_gets_new_cache_keys(tmp_path: Path) -> None:
    from ptfactory.engines.ct2_engine import CTranslate2Engine

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    weights = folder / "model.safetensors"
    weights.write_bytes(b"old weights")
    for engine_type in (TransformersEngine, CTranslate2Engine):
        engine = engine_type(model_id="mine", model_path=str(folder))
        before = engine.cache_identity()
        assert engine.cache_identity() == before  # nothing changed, same keys: the cache serves
        weights.write_bytes(b"retrained weights")  # same path, same model_id
        assert engine.cache_identity() != before, engine_type
        weights.write_bytes(b"old weights")
    assert TransformersEngine(model_id="m", model_path="bundled").weights_folder() is None
