"""Batches side by side (engines/streams.py): the same rows, cut into near-equal batches, give the
same texts, JSON replies and scores as one batch after another."""

from pathlib import Path

import pytest
import torch

from ptfactory.engines.base import SamplingParams
from ptfactory.engines.streams import balanced_batches, run_streams
from ptfactory.engines.transformers_engine import TransformersEngine

PROMPTS = [
    [{"role": "user", "content": text}]
    for text in (
        "Name a colour.",
        "Write three sentences about the sea.",
        "What is 2 + 2? Answer with the number only.",
        "List five fruits, one per line.",
        "Reply with one word: yes or no. Is water wet?",
    )
]


@pytest.mark.parametrize(
    ("rows", "size", "streams", "sizes"),
    [
        (35, 32, 2, [17, 18]),  # not 32 + 3: the second batch would run alone
        (35, 32, 1, [17, 18]),
        (64, 32, 2, [32, 32]),
        (65, 32, 2, [16, 16, 16, 17]),
        (3, 32, 2, [1, 2]),
        (1, 32, 2, [1]),
        (5, 1, 2, [1, 1, 1, 1, 1]),
        (0, 8, 2, []),
    ],
)
def test_balanced_batches_keep_the_order_and_cut_near_equal(
    rows: int, size: int, streams: int, sizes: list[int]
) -> None:
    order = list(range(100, 100 + rows))
    batches = balanced_batches(order, size, streams)
    assert [len(b) for b in batches] == sizes
    assert [i for b in batches for i in b] == order
    assert all(len(b) <= size for b in batches)


def test_run_streams_returns_in_order_restores_threads_and_raises() -> None:
    before = torch.get_num_threads()
    seen: list[int] = []

    def job(i: int) -> int:
        seen.append(torch.get_num_threads())
        return i * i

    assert run_streams([lambda i=i: job(i) for i in range(5)], 2, 2) == [0, 1, 4, 9, 16]
    assert set(seen) == {1}  # each stream on its share of the threads
    assert torch.get_num_threads() == before

    def fails() -> int:
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        run_streams([lambda: 1, fails], 2, 2)
    assert torch.get_num_threads() == before


def _engine(path: Path, streams: int) -> TransformersEngine:
    return TransformersEngine(
        model_id="smollm2",
        model_path=str(path),
        batch_size=4,
        score_batch_size=2,
        threads=2,
        streams=streams,
    )


def test_two_streams_give_one_streams_texts_json_and_scores(smollm2: Path) -> None:
    one, two = _engine(smollm2, 1), _engine(smollm2, 2)
    sampled = SamplingParams(n=2, max_tokens=24, temperature=0.8, top_p=0.95, seed=11)
    texts = [[c.text for c in group] for group in one.chat(PROMPTS, sampled)]
    assert [[c.text for c in group] for group in two.chat(PROMPTS, sampled)] == texts
    assert len({t for group in texts for t in group}) > 5  # it sampled

    schema = {
        "type": "object",
        "properties": {"colour": {"type": "string", "maxLength": 12}},
        "required": ["colour"],
    }
    constrained = SamplingParams(n=1, max_tokens=24, temperature=0.7, seed=5, json_schema=schema)
    replies = [group[0].text for group in one.chat(PROMPTS, constrained)]
    assert [group[0].text for group in two.chat(PROMPTS, constrained)] == replies

    answers = ["Blue.", "The sea is wide.", "4", "apple", "yes"]
    scored_one, scored_two = one.score(PROMPTS, answers), two.score(PROMPTS, answers)
    for a, b in zip(scored_one, scored_two, strict=True):
        assert a.tokens == b.tokens and a.logprobs
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-3
    choices = [one.choice_logprobs(PROMPTS, ["1", "2"]), two.choice_logprobs(PROMPTS, ["1", "2"])]
    for a_row, b_row in zip(*choices, strict=True):
        assert max(abs(x - y) for x, y in zip(a_row, b_row, strict=True)) < 1e-3
