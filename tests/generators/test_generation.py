"""Generation methods: a scripted engine for the parse/keep/drop logic, the real tiny model for the
assets (every integration path also runs for real)."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import pyarrow as pa

from ptfactory.assets.generation import candidate_instructions, candidate_responses
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.seeds import seed_tasks
from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.generators.config import GenerationConfig, SamplingConfig
from ptfactory.generators.instructions import generate_instructions
from ptfactory.generators.responses import generate_responses
from ptfactory.generators.seeds import SeedTask, seeds_to_table
from ptfactory.storage.schema import dropped_mask, validate_table
from ptfactory.storage.seedstore import SeedStore

SEEDS = [
    SeedTask(
        id="s1", instruction="Write a poem about the sea.", kind="sft", source="x:1", response="Waves..."
    ),
    SeedTask(id="s2", instruction="Explain photosynthesis simply.", kind="sft", source="x:2"),
    SeedTask(
        id="c1",
        instruction='def inc(x):\n    """Add one."""\n',
        kind="code",
        source="x:3",
        response="    return x + 1\n",
        entry_point="inc",
        tests="def check(candidate):\n    assert candidate(1) == 2\n",
    ),
]


@dataclass
class Scripted(Engine):
    """Answers each prompt kind with a fixed reply (pure logic test double)."""

    replies: dict[str, str] = field(default_factory=dict)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        out = []
        for conv in conversations:
            text = conv[-1]["content"]
            reply = next(
                (r for key, r in self.replies.items() if key in text), "Task: A generic new task here."
            )
            out.append([Completion(reply, 10, 5) for _ in range(params.n)])
        return out


def test_instructions_keep_parse_failures_with_raw_text() -> None:
    engine = Scripted(
        model_id="scripted",
        replies={
            "example tasks": "Task: Write a poem about the deep sea.",  # not novel: ROUGE-L 0.92 with a seed
            "deeper reasoning": "",  # unparseable
            "concrete constraints": "Task: Explain photosynthesis in three sentences for kids.",
            "related but different": "Task: Describe how plants breathe at night.",
            "NEW, different problem": "I cannot do that.",  # no code blocks
        },
    )
    config = GenerationConfig.model_validate(
        {"self_instruct": {"count": 1}, "evol_instruct": {"count": 2}, "code": {"count": 1}}
    )
    table, stats = generate_instructions(seeds_to_table(SEEDS, "b"), engine, config, "b")
    validate_table(table)
    rows = table.to_pylist()
    reasons = {r["decisions"][-1]["reason"] for r in rows}
    assert "not_novel" in reasons
    assert "unparseable_missing_code_blocks" in reasons
    assert stats.kept["seed"] == 3
    failed = next(r for r in rows if r["decisions"][-1]["reason"] == "unparseable_missing_code_blocks")
    assert failed["messages"][0]["content"] == "I cannot do that."  # the raw reply is kept
    assert '"raw": "I cannot do that."' in failed["decisions"][-1]["detail"]
    evolved = [r for r in rows if r["provenance"]["method"].startswith("evol_instruct")]
    assert evolved and all(r["provenance"]["template_hash"] for r in evolved)
    assert all(r["provenance"]["model"] == "scripted" for r in evolved)


def _seeds_only(seeds: pa.Table, engine: Engine) -> pa.Table:
    """The instruction stage with no new instructions: the seeds themselves, to be answered."""
    none = {"self_instruct": {"count": 0}, "evol_instruct": {"count": 0}, "code": {"count": 0}}
    instructions, _ = generate_instructions(seeds, engine, GenerationConfig.model_validate(none), "b")
    return instructions


def test_responses_sample_n_and_add_references() -> None:
    engine = Scripted(
        model_id="scripted", replies={"Complete the following": "```python\ndef inc(x): return x+1\n```"}
    )
    seeds = seeds_to_table(SEEDS, "b")
    instructions = _seeds_only(seeds, engine)

    table, stats = generate_responses(instructions, seeds, engine, SamplingConfig(n=2, temperature=0.0))
    validate_table(table)
    assert stats.kept["reference"] == 2  # s1 and c1 have reference answers
    assert stats.kept["response"] == 3  # identical samples (n=2, same text) count once
    code = [r for r in table.to_pylist() if r["kind"] == "code"]
    assert all(r["tests"] and r["entry_point"] == "inc" for r in code)
    assert not any(dropped_mask(table).to_pylist())


def test_generation_assets_with_the_tiny_model(tiny_model: Path, home: Path, tmp_path: Path) -> None:
    seeds_path = tmp_path / "seeds.jsonl"
    import json

    seeds_path.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"instruction": "Write a poem about the sea.", "response": "Waves."},
                {"instruction": "Explain photosynthesis simply."},
            ]
        )
    )
    SeedStore(str(home)).stage([seeds_path], "b1")
    config = tmp_path / "factory.yaml"
    config.write_text(
        f"engines:\n  generator: {{backend: transformers, model: {tiny_model}, price_per_mtok: 1.0}}\n"
        "generation:\n  self_instruct: {count: 2}\n  evol_instruct: {count: 1}\n  code: {count: 0}\n"
        "  instructions: {max_tokens: 16}\n  responses: {n: 2, max_tokens: 8}\n"
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b1"])
    result = dg.materialize(
        [seed_tasks, candidate_instructions, candidate_responses],
        instance=instance,
        partition_key="b1",
        resources=factory_resources(str(config), str(home)),
    )
    assert result.success
    meta = result.asset_materializations_for_node("candidate_responses")[0].metadata
    assert meta["completion_tokens"].value > 0
    assert meta["estimated_cost_usd"].value > 0
    assert 0 <= meta["cache_hit_rate"].value <= 1
    from ptfactory.storage.assetstore import AssetStore

    responses = AssetStore(str(home)).read("candidate_responses", "b1")
    sampled = [r for r in responses.to_pylist() if r["provenance"]["method"] == "response"]
    assert sampled
    prov = sampled[0]["provenance"]
    assert prov["engine"] == "transformers" and prov["model"] == str(tiny_model)
    assert '"n":2' in prov["sampling_params"] and prov["parent_id"] and prov["code_version"]
    instructions = AssetStore(str(home)).read("candidate_instructions", "b1")
    assert set(pa.compute.unique(instructions.column("batch")).to_pylist()) == {"b1"}


def test_a_code_task_in_words_is_asked_as_words_and_a_stub_inside_a_code_block() -> None:
    """A task in words inside a ```python block read as code (to the model, and to the harness when
    the reply lacked the function); a signature with its docstring is completed in one."""
    worded = SeedTask(
        id="c2",
        instruction="Write a function digit_sum(n) that returns the sum of the digits of n.",
        kind="code",
        source="x:4",
        tests="assert digit_sum(123) == 6\n",
    )
    seeds = seeds_to_table([SEEDS[2], worded], "b")
    engine = Scripted(model_id="scripted", replies={})
    instructions = _seeds_only(seeds, engine)

    table, _ = generate_responses(instructions, seeds, engine, SamplingConfig(n=1, temperature=0.0))
    asked = {
        r["messages"][0]["content"]: r["provenance"]["template_id"]
        for r in table.to_pylist()
        if r["provenance"]["method"] == "response"
    }
    stub = next(text for text in asked if "def inc" in text)
    words = next(text for text in asked if "digit_sum" in text)
    assert "```python\ndef inc(x):" in stub and asked[stub] == "respond_code"
    assert words.startswith("Write a function digit_sum(n)") and "```python\nWrite" not in words
    assert asked[words] == "respond_code_text"
