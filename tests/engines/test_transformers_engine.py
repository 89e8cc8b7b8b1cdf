"""The embedded engine on a tiny fixture model and on the bundled SmolLM2, for real."""

from pathlib import Path

import pytest

from ptfactory.engines.base import SamplingParams
from ptfactory.engines.cache import ResponseCache
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.errors import EngineError

HELLO = [{"role": "user", "content": "hello"}]
CODE = [
    {"role": "user", "content": "write a python function that returns the sum of two numbers, and explain it"}
]


def test_tiny_model_chat_counts_tokens_and_samples_n(tiny_model: Path) -> None:
    engine = TransformersEngine(model_id="tiny", model_path=str(tiny_model), batch_size=2)
    groups = engine.chat([HELLO, CODE, HELLO], SamplingParams(n=3, max_tokens=6, temperature=1.0, seed=1))
    assert [len(g) for g in groups] == [3, 3, 3]
    assert all(c.completion_tokens <= 6 for g in groups for c in g)
    assert groups[0][0].prompt_tokens > 0
    assert groups[1][0].prompt_tokens > groups[0][0].prompt_tokens  # a longer prompt counts more tokens
    assert len({c.text for c in groups[1]}) > 1  # sampling gives different texts
    assert engine.stats.requests_sent == 2  # the repeated conversation went out once


def test_tiny_model_is_deterministic_with_a_seed(tiny_model: Path) -> None:
    engine = TransformersEngine(model_id="tiny", model_path=str(tiny_model))
    params = SamplingParams(n=2, max_tokens=5, temperature=1.0, seed=7)
    first = [c.text for c in engine.chat([HELLO, CODE], params)[1]]
    again = [
        c.text
        for c in TransformersEngine(model_id="tiny", model_path=str(tiny_model)).chat([HELLO, CODE], params)[
            1
        ]
    ]
    assert first == again


def test_tiny_model_scores_continuations(tiny_model: Path) -> None:
    engine = TransformersEngine(model_id="tiny", model_path=str(tiny_model))
    scored = engine.score([HELLO, []], ["the quick brown fox", "the quick brown fox"])
    assert scored[0].tokens == ["the", " quick", " brown", " fox"]
    assert all(lp < 0 for lp in scored[0].logprobs)
    assert scored[0].logprobs != scored[1].logprobs  # the prompt conditions the continuation


def test_cache_answers_a_second_engine(tiny_model: Path, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    params = SamplingParams(max_tokens=4, temperature=0)
    first = TransformersEngine(model_id="tiny", model_path=str(tiny_model), cache=cache)
    texts = [g[0].text for g in first.chat([HELLO, CODE], params)]
    second = TransformersEngine(model_id="tiny", model_path=str(tiny_model), cache=cache)
    assert [g[0].text for g in second.chat([HELLO, CODE], params)] == texts
    assert (second.stats.requests_sent, second.stats.cache_hits) == (0, 2)
    assert second._model is None  # nothing loaded: the cache answered everything


def test_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    engine = TransformersEngine(model_id="nope", model_path=str(tmp_path / "no-such-model"))
    with pytest.raises(EngineError, match="cannot load model"):
        engine.chat([HELLO], SamplingParams(max_tokens=2))


@pytest.mark.slow
def test_bundled_smollm2_answers_and_scores(smollm2: Path) -> None:
    engine = TransformersEngine(model_id="SmolLM2-135M-Instruct", model_path=str(smollm2), threads=2)
    answer = engine.chat(
        [[{"role": "user", "content": "What is the capital of France?"}]],
        SamplingParams(max_tokens=12, temperature=0),
    )[0][0]
    assert "Paris" in answer.text
    right, wrong = engine.score(
        [[{"role": "user", "content": "What is the capital of France?"}]] * 2,
        ["The capital of France is Paris.", "The capital of France is Banana."],
    )
    assert right.mean_nll < wrong.mean_nll


def _full_logits_score(engine: TransformersEngine, prompt: str, continuation: str) -> list[float]:
    """The reference: one row alone, every position's logits, log-softmax, the continuation's."""
    import torch

    from ptfactory.engines.scoring import score_token_ids

    model, tokenizer = engine._load()
    context, cont = score_token_ids(tokenizer, prompt, continuation)
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([context + cont])).logits[0].float()
    logprobs = torch.log_softmax(logits[len(context) - 1 : len(context) + len(cont) - 1], dim=-1)
    return [float(x) for x in logprobs.gather(1, torch.tensor(cont)[:, None])[:, 0]]


@pytest.mark.parametrize("model", ["tiny", "bundled:gemma3-270m"])
def test_scoring_reads_the_head_only_where_asked_and_gives_the_full_forward_values(
    model: str, tiny_model: Path
) -> None:
    """The vocabulary head runs on the continuation's positions alone (Gemma 3: 262k tokens wide,
    the bulk of its work) and on the last position for choices: the same values as the whole
    forward pass, in batches with padding and cut where the logits budget says."""
    path = str(tiny_model) if model == "tiny" else model
    engine = TransformersEngine(model_id=model, model_path=path, score_batch_size=3, threads=2)
    prompts = [
        "Question: what is 2 + 2?\nAnswer:",
        "Say a colour.",
        "Q: name a river in Europe that is long\nA:",
        "x",
    ]
    conts = [" 4, because two and two make four.", " Blue", " The Danube", " y z"]
    got = engine._score(prompts, conts)
    for prompt, cont, scored in zip(prompts, conts, got, strict=True):
        want = _full_logits_score(engine, prompt, cont)
        assert len(scored.logprobs) == len(want) > 0
        assert max(abs(a - b) for a, b in zip(scored.logprobs, want, strict=True)) < 2e-4
    choices = engine._choice_logprobs(prompts, [" A", " B"])
    for prompt, row in zip(prompts, choices, strict=True):
        want_a = _full_logits_score(engine, prompt, " A")
        want_b = _full_logits_score(engine, prompt, " B")
        if len(want_a) == len(want_b) == 1:  # one token each: the one-pass path
            assert abs(row[0] - want_a[0]) < 2e-4 and abs(row[1] - want_b[0]) < 2e-4


def test_score_batches_cut_where_the_logits_would_pass_the_budget() -> None:
    from ptfactory.engines.transformers_engine import LOGIT_FLOATS, _logit_batches

    vocab = LOGIT_FLOATS // 100  # 100 kept positions fit (a continuation keeps its length + 1)
    assert _logit_batches([0, 1, 2, 3], [40, 40, 40, 200], 8, vocab, 1) == [[0, 1], [2], [3]]
    assert _logit_batches([0, 1, 2], [1, 1, 1], 2, vocab, 1) == [[0], [1, 2]]
    assert _logit_batches([0, 1, 2, 3], [1, 1, 1, 1], 8, vocab, 2) == [[0, 1], [2, 3]]  # one per stream
    assert _logit_batches([], [], 8, vocab, 1) == []
