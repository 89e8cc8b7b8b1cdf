"""Constrained JSON on the embedded engine, with the bundled SmolLM2 for real: every reply that
finishes parses and validates against the schema (the judges' vote and an agent's tool call)."""

import json
from pathlib import Path
from typing import Any

import pytest

from ptfactory.annotators.judges.llm import VOTE_SCHEMA
from ptfactory.engines.base import Engine, SamplingParams
from ptfactory.engines.ct2_engine import CTranslate2Engine
from ptfactory.engines.transformers_engine import TransformersEngine

TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "tool": {"type": "string", "enum": ["run_python", "finish"]},
        "arguments": {
            "type": "object",
            "properties": {"code": {"type": "string", "maxLength": 200}},
            "required": ["code"],
        },
    },
    "required": ["tool", "arguments"],
}
QUESTIONS = [
    ("What is 12 * 7?", "84"),
    ("Name the capital of Peru.", "Lima"),
    ("Is 17 a prime number?", "No, it is even."),
    ("What colour is the sky on a clear day?", "Blue."),
    ("Write a python function that reverses a string.", "def rev(s): return s[::-1]"),
    ("How many legs does a spider have?", "Six."),
    ("What is the boiling point of water at sea level?", "100 degrees Celsius."),
    ("Translate 'bonjour' to English.", "Hello."),
    ("What is 2 to the power of 10?", "1024"),
    ("Who wrote Hamlet?", "Charles Dickens."),
]


def _validate(value: Any, schema: dict[str, Any]) -> None:
    """The keywords these schemas use, checked by hand (no schema library in the dependencies)."""
    kind = schema.get("type")
    if kind == "object":
        assert isinstance(value, dict) and set(schema["required"]) <= set(value), value
        for key, item in value.items():
            if key in schema["properties"]:
                _validate(item, schema["properties"][key])
            else:
                assert schema.get("additionalProperties", True) is not False, key
    elif kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool)
        assert schema.get("minimum", value) <= value <= schema.get("maximum", value)
    elif kind == "string":
        assert isinstance(value, str) and len(value) <= schema.get("maxLength", len(value))
    if "enum" in schema:
        assert value in schema["enum"], value


def _judge(question: str, answer: str) -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": f"Rate the answer from 1 to 10. Reply in JSON with score, verdict (accept or "
            f"reject) and a one-sentence rationale.\nQuestion: {question}\nAnswer: {answer}",
        }
    ]


@pytest.mark.parametrize("engine_class", [TransformersEngine, CTranslate2Engine])
def test_a_random_model_is_held_to_the_schema(tiny_model: Path, engine_class: type[Engine]) -> None:
    """Random weights would never write JSON by themselves: every reply is the grammar's doing
    (on ctranslate2, constrained requests are served by its transformers delegate)."""
    schema = {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["accept", "reject"]},
            "score": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["verdict", "score"],
        "additionalProperties": False,
    }
    engine: Any = engine_class(model_id="tiny", model_path=str(tiny_model), batch_size=4)  # type: ignore[call-arg]
    assert engine.supports_json_schema
    params = SamplingParams(n=2, max_tokens=40, temperature=1.0, seed=1, json_schema=schema)
    replies = [c for g in engine.chat([_judge(q, a) for q, a in QUESTIONS[:4]], params) for c in g]
    assert len(replies) == 8
    for reply in replies:
        assert reply.finish_reason == "stop", reply.text
        _validate(json.loads(reply.text), schema)
    unconstrained = engine.chat([_judge(*QUESTIONS[0])], SamplingParams(max_tokens=12, temperature=0))
    assert not unconstrained[0][0].text.startswith("{")


@pytest.mark.slow
def test_twenty_constrained_votes_parse_and_validate(smollm2: Path) -> None:
    engine = TransformersEngine(model_id="SmolLM2-135M-Instruct", model_path=str(smollm2), threads=2)
    assert engine.supports_json_schema
    params = SamplingParams(n=2, max_tokens=448, temperature=0.8, seed=5, json_schema=VOTE_SCHEMA)
    # 448 tokens hold the longest reply the schema allows (rationale maxLength 400 characters)
    groups = engine.chat([_judge(q, a) for q, a in QUESTIONS], params)
    replies = [c for g in groups for c in g]
    assert len(replies) == 20
    for reply in replies:
        assert reply.finish_reason == "stop", reply.text
        _validate(json.loads(reply.text), VOTE_SCHEMA)
        assert reply.text.startswith('{"score":')  # the schema's property order
    assert len({r.text for r in replies}) > 10  # sampled, not one reply repeated


@pytest.mark.slow
def test_constrained_tool_calls_validate_and_cut_replies_say_length(smollm2: Path) -> None:
    engine = TransformersEngine(model_id="SmolLM2-135M-Instruct", model_path=str(smollm2), threads=2)
    task = [
        {
            "role": "user",
            "content": "Call a tool as JSON: run_python with the code that prints the sum of 2 and 3.",
        }
    ]
    (call,) = engine.chat([task], SamplingParams(max_tokens=160, temperature=0, json_schema=TOOL_SCHEMA))[0]
    assert call.finish_reason == "stop", call.text
    _validate(json.loads(call.text), TOOL_SCHEMA)
    # a reply cut by max_tokens is reported as such (the caller retries), never passed off as done
    (cut,) = engine.chat([task], SamplingParams(max_tokens=4, temperature=0, json_schema=TOOL_SCHEMA))[0]
    assert cut.finish_reason == "length" and cut.completion_tokens == 4
    assert call.text.startswith(cut.text)  # the same constrained path, only shorter
