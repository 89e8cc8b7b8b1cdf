"""The seeded sampler draws from the nucleus distribution, row by row, from each row's own seed."""

import math

import pytest
import torch

from ptfactory.engines.sampling import SeededSampler


def _nucleus(logits: torch.Tensor, temperature: float, top_p: float) -> dict[int, float]:
    """The distribution the sampler should draw from, worked out the long way."""
    probs = torch.softmax(logits.double() / temperature, dim=-1).tolist()
    order = sorted(range(len(probs)), key=lambda t: -probs[t])
    kept, mass = [], 0.0
    for token in order:
        if mass > top_p:  # the first token whose preceding mass passes top_p is dropped
            break
        kept.append(token)
        mass += probs[token]
    return {t: probs[t] / mass for t in kept}


@pytest.mark.parametrize(
    ("vocab", "temperature", "top_p", "spread"),
    [
        (50, 0.7, 0.9, 3.0),  # a peaked distribution: the nucleus is inside the head
        (2000, 1.0, 0.95, 0.05),  # a flat one: the nucleus reaches past the head, a full sort
        (40, 0.8, 1.0, 2.0),  # no top-p: the whole vocabulary
    ],
)
def test_draws_follow_the_nucleus_distribution(
    vocab: int, temperature: float, top_p: float, spread: float
) -> None:
    draws = 20_000
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(vocab)) * spread
    wanted = _nucleus(logits, temperature, top_p)
    sampler = SeededSampler(range(draws), temperature, top_p, "cpu")  # one row per seed
    counts = torch.bincount(sampler.draw(logits.expand(draws, vocab)), minlength=vocab).tolist()
    assert {t for t, c in enumerate(counts) if c} <= set(wanted)  # nothing outside the nucleus
    # a chi-square goodness of fit over the tokens expected often enough to test
    often = [t for t, p in wanted.items() if p * draws >= 5]
    rare = 1 - sum(wanted[t] for t in often)
    chi2 = sum((counts[t] - wanted[t] * draws) ** 2 / (wanted[t] * draws) for t in often)
    if rare * draws >= 5:
        seen = draws - sum(counts[t] for t in often)
        chi2 += (seen - rare * draws) ** 2 / (rare * draws)
    degrees = len(often) - (0 if rare * draws >= 5 else 1)
    # far beyond the 99.9th percentile of chi-square with these degrees of freedom
    assert chi2 < degrees + 6 * math.sqrt(2 * degrees) + 10, (chi2, degrees)


def test_a_rows_tokens_depend_on_its_seed_alone() -> None:
    logits = torch.randn(6, 300, generator=torch.Generator().manual_seed(0))
    together = SeededSampler([11, 12, 13, 14, 15, 16], 0.9, 0.95, "cpu")
    alone = [SeededSampler([seed], 0.9, 0.95, "cpu") for seed in [11, 12, 13, 14, 15, 16]]
    for _ in range(5):
        assert together.draw(logits).tolist() == [
            a.draw(logits[i : i + 1]).item() for i, a in enumerate(alone)
        ]
    # rows 1, 3 and 4 end: the others go on drawing what they would have drawn
    together.keep([0, 2, 5])
    kept = [alone[0], alone[2], alone[5]]
    assert together.draw(logits[[0, 2, 5]]).tolist() == [
        a.draw(logits[i : i + 1]).item() for i, a in zip([0, 2, 5], kept, strict=True)
    ]


def test_as_a_logits_processor_only_the_drawn_token_is_left() -> None:
    logits = torch.randn(3, 100, generator=torch.Generator().manual_seed(1))
    masked = SeededSampler([1, 2, 3], 0.7, 0.9, "cpu")(torch.zeros(3, 1, dtype=torch.long), logits)
    drawn = SeededSampler([1, 2, 3], 0.7, 0.9, "cpu").draw(logits)
    assert masked.argmax(dim=-1).tolist() == drawn.tolist()
    assert torch.isinf(masked).sum(dim=-1).tolist() == [99, 99, 99]


@pytest.mark.parametrize(
    ("vocab", "top_p", "spread"),
    [(49152, 0.95, 4.0), (3000, 0.9, 0.05), (500, 1.0, 2.0), (500, 0.5, 1.0)],
)
def test_a_row_draws_what_torch_multinomial_draws_from_its_generator(
    vocab: int, top_p: float, spread: float
) -> None:
    """The draws of the sampler this engine had before its decoding loop (``multinomial`` on the
    nucleus, row by row), so a request's sampled text is the one earlier versions drew."""
    logits = torch.randn(8, vocab, generator=torch.Generator().manual_seed(vocab)) * spread
    seeds = [101 + row for row in range(8)]
    sampler = SeededSampler(seeds, 0.8, top_p, "cpu")
    generators = [torch.Generator().manual_seed(s) for s in seeds]
    for _ in range(4):
        probs = torch.softmax(logits / 0.8, dim=-1)
        if top_p < 1.0:
            ordered, index = probs.sort(dim=-1, descending=True)
            ordered = ordered.masked_fill(ordered.cumsum(dim=-1) - ordered > top_p, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, index, ordered)
        wanted = [int(torch.multinomial(probs[r], 1, generator=g).item()) for r, g in enumerate(generators)]
        assert sampler.draw(logits).tolist() == wanted
