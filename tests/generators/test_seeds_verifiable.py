"""Verifiable seeds: ``answer``, ``metadata`` and ``constraints`` are read, checked (errors name the
file, line and field) and carried in ``reference`` onto seed rows and onto responses to the seed's
own instruction, never onto tasks derived from it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.errors import SeedError
from ptfactory.generators.config import GenerationConfig, SamplingConfig
from ptfactory.generators.instructions import generate_instructions
from ptfactory.generators.responses import generate_responses
from ptfactory.generators.seeds import read_seeds, seeds_to_table
from ptfactory.storage.schema import validate_table

GSM = "Janet's ducks lay 16 eggs per day. She eats three and bakes with four. She sells the rest at $2 each."
NOTE = [{"type": "number_words", "relation": "less than", "num_words": 50}, {"type": "no_comma"}]


def _jsonl(tmp_path: Path, *rows: dict[str, Any]) -> Path:
    path = tmp_path / "seeds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_references_from_answer_response_and_constraints(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        {"id": "a", "instruction": GSM, "answer": 18},
        {"id": "b", "instruction": GSM + " How much?", "response": "9 * 2 = 18 dollars.\n#### 18"},
        {"id": "c", "instruction": "Write a short note.", "constraints": NOTE},
        {"id": "d", "instruction": "Say hi.", "response": "Hi!"},
        {"id": "e", "instruction": "What is half?", "answer": "$\\frac{1}{2}$"},
        {"id": "f", "instruction": "Is 91 prime?", "answer": False},  # a boolean: a yes/no answer
    )
    rows = seeds_to_table(read_seeds(path), "b1").to_pylist()
    references = {r["provenance"]["seed_task_id"]: r["reference"] for r in rows}
    assert (references["a"]["answer"], references["a"]["source"]) == ("18", "answer")
    assert (references["b"]["answer"], references["b"]["source"]) == ("18", "response")
    assert json.loads(references["c"]["constraints"]) == NOTE and references["c"]["answer"] is None
    assert references["d"] is None  # a response with no marked answer is no reference
    assert references["e"]["answer"] == "\\frac{1}{2}"
    assert references["f"]["answer"] == "false"  # refused before: "must be text or a number"
    reasons = {r["provenance"]["seed_task_id"]: r["decisions"][0]["reason"] for r in rows}
    assert reasons == {
        "a": "verifiable",
        "b": "with_reference",
        "c": "verifiable",
        "d": "with_reference",
        "e": "verifiable",
        "f": "verifiable",
    }


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"instruction": "q", "answer": {"value": 18}},
            r"seeds.jsonl:1: field 'answer' must be text, a number or a boolean, got",
        ),
        (
            {"instruction": "q", "answer": ["18"]},
            r"seeds.jsonl:1: field 'answer' must be text, a number or a boolean",
        ),
        ({"instruction": "q", "metadata": [1]}, r"seeds.jsonl:1: field 'metadata' must be an object, got"),
        (
            {"instruction": "q", "metadata": "{bad"},
            r"seeds.jsonl:1: field 'metadata' is text that is not JSON",
        ),
        (
            {"instruction": "q", "metadata": {"source_dataset": "nope"}},
            r"seeds.jsonl:1: field 'metadata': unknown procedural family 'nope'",
        ),
        ({"instruction": "q", "constraints": {"type": "no_comma"}}, r"field 'constraints' must be a list"),
        (
            {"instruction": "q", "constraints": [{"type": "number_words", "num_words": 5}]},
            r"seeds.jsonl:1: field 'constraints': constraint 0: length_constraints:number_words: missing relation",
        ),
        (
            {
                "instruction": "q",
                "kind": "code",
                "entry_point": "f",
                "tests": "def check(c):\n    pass\n",
                "answer": "1",
            },
            r"seeds.jsonl:1: field 'answer' only belongs to sft seeds",
        ),
        (
            {"instruction": "q", "reference": "18"},
            r"seeds.jsonl:1: unknown field 'reference'; allowed: .*answer",
        ),
    ],
)
def test_bad_fields_name_the_file_line_and_field(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    with pytest.raises(SeedError, match=message):
        read_seeds(_jsonl(tmp_path, row))


def test_parquet_seeds_may_hold_json_text(tmp_path: Path) -> None:
    path = tmp_path / "seeds.parquet"
    pq.write_table(
        pa.table({"instruction": ["Write a note."], "constraints": [json.dumps(NOTE)], "answer": [None]}),
        path,
    )
    (task,) = read_seeds(path)
    assert json.loads(task.constraints or "") == NOTE


@dataclass
class Echo(Engine):
    """Replies with a fixed text (a test double of the engine: the carrying logic is what is tested)."""

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        return [
            [Completion("Task: Write a story about a brave duck.", 5, 5)] * params.n for _ in conversations
        ]


def test_the_reference_reaches_responses_to_the_seeds_own_instruction(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, {"id": "a", "instruction": GSM, "answer": 18, "response": "#### 18"})
    seeds = seeds_to_table(read_seeds(path), "b")
    config = GenerationConfig.model_validate(
        {"self_instruct": {"count": 1}, "evol_instruct": {"count": 1}, "code": {"count": 0}}
    )
    engine = Echo(model_id="echo")
    instructions, _ = generate_instructions(seeds, engine, config, "b")
    responses, _ = generate_responses(instructions, seeds, engine, SamplingConfig(n=1, temperature=0.0))
    validate_table(responses)
    by_method: dict[str, list[dict[str, Any]]] = {}
    for row in responses.to_pylist():
        parent = next(i for i in instructions.to_pylist() if i["sample_id"] == row["provenance"]["parent_id"])
        by_method.setdefault(f"{row['provenance']['method']}<-{parent['provenance']['method']}", []).append(
            row
        )
    assert by_method["response<-seed"][0]["reference"]["answer"] == "18"  # a sample to the seed's own task
    assert by_method["reference<-seed"][0]["reference"]["answer"] == "18"  # the seed's own response
    derived = [r for key, rows in by_method.items() if not key.endswith("<-seed") for r in rows]
    assert derived and all(r["reference"] is None for r in derived)  # self-/evol-instruct: none
