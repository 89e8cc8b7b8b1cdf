"""Each generated row records why the engine stopped (``provenance.finish_reason``): the
difficulty stage drops a response cut at max_tokens as ``truncated``."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.generators.config import GenerationConfig, SamplingConfig
from ptfactory.generators.instructions import generate_instructions
from ptfactory.generators.responses import generate_responses
from ptfactory.generators.seeds import SeedTask, seeds_to_table
from ptfactory.storage.schema import validate_table

SEEDS = [
    SeedTask(
        id="s1", instruction="Write a long poem about the sea.", kind="sft", source="x:1", response="Waves."
    ),
    SeedTask(id="s2", instruction="Name a colour.", kind="sft", source="x:2"),
]
ONLY_SEEDS = GenerationConfig.model_validate(
    {"self_instruct": {"count": 0}, "evol_instruct": {"count": 0}, "code": {"count": 0}}
)


@dataclass
class Cut(Engine):
    """Stops the poem at max_tokens; answers the colour in full."""

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        return [
            [Completion("The sea, the sea", 5, params.max_tokens, "length")]
            if "poem" in conv[-1]["content"]
            else [Completion("Blue.", 5, 2, "stop")]
            for conv in conversations
        ]


def _by_prompt(table: object) -> dict[tuple[str, str], str | None]:
    rows = table.to_pylist()  # type: ignore[attr-defined]
    return {
        (r["messages"][0]["content"], r["provenance"]["method"]): r["provenance"]["finish_reason"]
        for r in rows
    }


def test_responses_record_the_engines_finish_reason() -> None:
    engine = Cut(model_id="cut")
    seeds = seeds_to_table(SEEDS, "b")
    instructions, _ = generate_instructions(seeds, engine, ONLY_SEEDS, "b")
    table, _ = generate_responses(instructions, seeds, engine, SamplingConfig(n=1, max_tokens=5))
    validate_table(table)
    assert _by_prompt(table) == {
        ("Write a long poem about the sea.", "response"): "length",
        ("Name a colour.", "response"): "stop",
        ("Write a long poem about the sea.", "reference"): None,  # a seed's answer: no engine stopped it
    }


def test_the_real_engine_reports_length_exactly_when_it_ran_out(tiny_model: Path) -> None:
    engine = TransformersEngine(model_id="tiny", model_path=str(tiny_model))
    seeds = seeds_to_table(SEEDS, "b")
    instructions, _ = generate_instructions(seeds, engine, ONLY_SEEDS, "b")
    table, _ = generate_responses(
        instructions, seeds, engine, SamplingConfig(n=2, max_tokens=6, temperature=1.0)
    )
    sampled = [r["provenance"] for r in table.to_pylist() if r["provenance"]["method"] == "response"]
    assert sampled
    for prov in sampled:
        assert prov["finish_reason"] in ("stop", "length"), prov
        assert (prov["finish_reason"] == "length") == (prov["completion_tokens"] == 6), prov
