"""Requests of different settings in one call (``Engine.chat_many``): each is cached under its own
settings, and on the transformers engine, whose batches then mix budgets, temperatures, schemas
and tools, each gets the reply it gets in a call of its own."""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.engines.cache import ResponseCache
from ptfactory.engines.processors import RowRule, RowRules
from ptfactory.engines.streams import balanced_batches, dealt_batches
from ptfactory.engines.transformers_engine import TransformersEngine


@dataclass
class Echo(Engine):
    calls: list[tuple[int, float, int]] = field(default_factory=list)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        self.calls.append((len(conversations), params.temperature, params.max_tokens))
        return [
            [Completion(f"{c[-1]['content']}@{params.max_tokens}", 1, 1) for _ in range(params.n)]
            for c in conversations
        ]


def _conv(text: str) -> Conversation:
    return [{"role": "user", "content": text}]


def test_chat_many_caches_each_request_under_its_own_settings(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    short, long = SamplingParams(max_tokens=8), SamplingParams(max_tokens=64, temperature=0.2)
    engine = Echo(model_id="m", cache=cache)
    out = engine.chat_many([(_conv("a"), short), (_conv("b"), long), (_conv("c"), short)])
    assert [g[0].text for g in out] == ["a@8", "b@64", "c@8"]  # in the order asked
    # the default backend path: one _chat per distinct setting
    assert sorted(engine.calls) == [(1, 0.2, 64), (2, 0.7, 8)]
    again = Echo(model_id="m", cache=cache)
    assert again.chat([_conv("b")], long)[0][0].text == "b@64"  # what chat would have cached
    assert again.chat([_conv("a"), _conv("c")], short)[1][0].text == "c@8"
    assert again.calls == [] and again.stats.cache_hits == 3


@pytest.mark.parametrize(
    ("rows", "size", "streams"), [(10, 32, 2), (35, 32, 2), (65, 32, 2), (3, 8, 2), (0, 8, 2)]
)
def test_dealt_batches_deal_every_row_once_over_balanced_batches_count(
    rows: int, size: int, streams: int
) -> None:
    order = list(range(rows))
    dealt = dealt_batches(order, size, streams)
    assert len(dealt) == len(balanced_batches(order, size, streams))
    assert sorted(i for b in dealt for i in b) == order and all(len(b) <= size for b in dealt)
    assert all(b == sorted(b) for b in dealt)  # each batch keeps the order's order
    if rows == 10:  # 8 short-budget rows then 2 long ones: one long row in each stream
        assert [b[-1] for b in dealt] == [8, 9]


def test_row_rules_mixed_rows_pick_as_rows_of_their_own_kind() -> None:
    """A batch's rows of different settings each pick what the row picks alone: greedy rows their
    argmax, sampled rows a ``torch.multinomial`` draw from their own generator."""
    generator = torch.Generator().manual_seed(3)
    rules = [
        RowRule(1, 0.0),
        RowRule(2, 0.7, 0.9),
        RowRule(3, 1.0),
        RowRule(4, 0.7, 0.9),
        RowRule(5, 0.0),
        RowRule(6, 1.0),
    ]
    ended = {49}
    mixed = RowRules(rules, prompt_width=1, ended=ended)
    alone = [RowRules([rule], prompt_width=1, ended=ended) for rule in rules]
    ids = torch.zeros(6, 1, dtype=torch.long)
    for _ in range(6):
        logits = torch.randn(6, 50, generator=generator) * 3
        logits[:, 49] = -1e9  # no row ends here: every row draws every step
        out = mixed(ids, logits.clone())  # type: ignore[arg-type]
        picked = out.argmax(-1)
        for row, one in enumerate(alone):
            own = one(ids[row : row + 1], logits[row : row + 1].clone())  # type: ignore[arg-type]
            assert int(own.argmax(-1)) == int(picked[row])
            if rules[row].temperature > 0:  # only the drawn token is left for generate's argmax
                assert int(torch.isfinite(out[row]).sum()) == 1
            else:
                assert int(picked[row]) == int(logits[row].argmax())
        ids = torch.cat([ids, picked[:, None]], dim=-1)
    assert len(set(ids[2].tolist())) > 2  # the sampled rows did sample


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 20}, "sure": {"type": "boolean"}},
    "required": ["answer", "sure"],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]
REQUESTS = [
    (_conv("Name a colour."), SamplingParams(temperature=0, max_tokens=12)),
    (
        _conv("Write three sentences about the sea."),
        SamplingParams(temperature=0.7, top_p=0.95, max_tokens=40, seed=5),
    ),
    (
        _conv("List five fruits, one per line."),
        SamplingParams(n=2, temperature=1.0, max_tokens=20, seed=6, stop=("\n",)),
    ),
    (
        _conv("Is water wet? Reply in JSON."),
        SamplingParams(temperature=0.7, max_tokens=48, seed=7, json_schema=SCHEMA),
    ),
    (_conv("What is 2 + 2?"), SamplingParams(temperature=0, max_tokens=30, json_schema=SCHEMA)),
    (_conv("List the files here."), SamplingParams(temperature=0.7, max_tokens=24, seed=8, tools=TOOLS)),
    (_conv("Tell me about the moon."), SamplingParams(temperature=0.7, max_tokens=64, seed=9)),
]


def test_mixed_requests_get_the_replies_they_get_alone(smollm2: Path) -> None:
    engine = TransformersEngine(
        model_id="smollm2", model_path=str(smollm2), batch_size=3, threads=2, streams=2
    )
    together = engine.chat_many(REQUESTS)
    alone = [engine.chat([conversation], params)[0] for conversation, params in REQUESTS]
    assert [[c.text for c in g] for g in together] == [[c.text for c in g] for g in alone]
    assert [[c.finish_reason for c in g] for g in together] == [[c.finish_reason for c in g] for g in alone]
    for group, (_, params) in zip(together, REQUESTS, strict=True):
        assert len(group) == params.n
        for completion in group:
            assert completion.completion_tokens <= params.max_tokens
            if params.json_schema is not None and completion.finish_reason == "stop":
                reply = json.loads(completion.text)  # a finished constrained reply parses
                assert set(reply) == {"answer", "sure"}
            if params.stop:
                assert "\n" not in completion.text
    assert together[0][0].finish_reason == "length" or together[0][0].completion_tokens < 12
    assert len(set(together[2][0].text.split()) | set(together[2][1].text.split())) > 1


def test_rendered_prompts_tokenize_as_the_chat_template_does(smollm2: Path) -> None:
    engine = TransformersEngine(model_id="smollm2", model_path=str(smollm2))
    _, tokenizer = engine._load()
    conversations = [c for c, _ in REQUESTS[:4]]
    for tools in (None, TOOLS):
        texts = [
            tokenizer.apply_chat_template(c, tools=tools, add_generation_prompt=True, tokenize=False)
            for c in conversations
        ]
        expected = tokenizer.apply_chat_template(
            conversations,
            tools=tools,
            add_generation_prompt=True,
            return_tensors="pt",
            padding=True,
            return_dict=True,
        )
        encoded = engine._encode(texts)
        assert torch.equal(encoded["input_ids"], expected["input_ids"])
        assert torch.equal(encoded["attention_mask"], expected["attention_mask"])
