"""Model-generated rows with verifier labels for the judge bench: the factory's own generations.

The bundled generator (SmolLM2-135M-Instruct through the default engine, the factory's response
sampling: temperature 0.7, top-p 0.95) answers, ``samples`` times each:

- ``gen-math``: word problems with a reference answer: one-step problems written here (a
  135M-parameter generator gets some of those right, so both labels occur), the demo's
  hand-written seeds (demo/seeds/math.jsonl) and GSM8K *test* questions (bench material only:
  never a seed);
- ``gen-code``: functions to write with tests: one-liners written here, the demo's seeds
  (demo/seeds/code.jsonl) and HumanEval problems (bench material only), asked through the
  factory's ``respond_code`` template;
- ``gen-procedural``: reasoning-gym tasks (``ptfactory.generators.procedural``, the families of
  ``ptf seeds procedural``), the answer asked for between ``<answer>`` tags.

Each row keeps what its verifier needs (``reference``, ``tests`` and ``entry_point``) and
``provenance.model``: the label is the verifier's verdict when ``ptf judge`` scores the rows (pass
1, fail 0; ``no_answer`` and abstentions unlabelled). Replies go through the engine's response
cache, so a rerun generates nothing.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.judge_data import data_file
from ptfactory.engines.base import Engine, SamplingParams
from ptfactory.filters.verify import reference_answer, reference_record
from ptfactory.generators.procedural import draw_seed_rows
from ptfactory.generators.prompts import template
from ptfactory.storage.schema import PROVENANCE, REFERENCE

__all__ = ["GENERATED", "generated_table"]

REPO = Path(__file__).resolve().parent.parent
GENERATED = ("gen-math", "gen-code", "gen-procedural")
FAMILIES = ("basic_arithmetic", "chain_sum", "leg_counting")
SCHEMA = pa.schema(
    [("source", pa.string()), ("item", pa.string()), ("prompt", pa.string()), ("response", pa.string()),
     ("reference", REFERENCE), ("tests", pa.string()), ("entry_point", pa.string()),
     ("provenance", PROVENANCE)]
)  # fmt: skip


EASY_MATH = [
    ("Sam has 4 apples and buys 3 more. How many apples does Sam have now?", "7"),
    ("A box holds 6 pens. How many pens are in 5 boxes?", "30"),
    ("Lena had 20 stickers and gave away 8. How many stickers does she have left?", "12"),
    ("There are 9 birds on a fence and 6 more land on it. How many birds are on the fence?", "15"),
    ("A pizza is cut into 8 slices and 3 are eaten. How many slices are left?", "5"),
    ("Tom reads 10 pages a day. How many pages does he read in 4 days?", "40"),
    ("A farmer has 18 eggs and puts them equally into 3 baskets. How many eggs are in each basket?", "6"),
    ("A shirt costs 12 dollars and a hat costs 7 dollars. How much do both cost together?", "19"),
    ("A class has 25 students and 5 are absent. How many students are present?", "20"),
    ("Each car has 4 wheels. How many wheels do 7 cars have?", "28"),
    ("Mia is 9 years old. How old will she be in 6 years?", "15"),
    ("A rope is 30 meters long and 12 meters are cut off. How long is the rest of the rope?", "18"),
]
EASY_CODE = [
    ("def add(a: int, b: int) -> int:\n    \"\"\"Return the sum of a and b.\"\"\"\n", "add",
     "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"),
    ("def is_even(n: int) -> bool:\n    \"\"\"Return True if n is even.\"\"\"\n", "is_even",
     "def check(candidate):\n    assert candidate(4) is True\n    assert candidate(7) is False\n    assert candidate(0) is True\n"),
    ("def reverse(text: str) -> str:\n    \"\"\"Return text reversed.\"\"\"\n", "reverse",
     "def check(candidate):\n    assert candidate('abc') == 'cba'\n    assert candidate('') == ''\n"),
    ("def largest(values: list[int]) -> int:\n    \"\"\"Return the largest number in a non-empty list.\"\"\"\n", "largest",
     "def check(candidate):\n    assert candidate([3, 9, 2]) == 9\n    assert candidate([-5, -2]) == -2\n"),
    ("def square(n: int) -> int:\n    \"\"\"Return n squared.\"\"\"\n", "square",
     "def check(candidate):\n    assert candidate(3) == 9\n    assert candidate(-4) == 16\n"),
    ("def count_vowels(text: str) -> int:\n    \"\"\"Return how many of the letters in text are vowels (a, e, i, o, u; any case).\"\"\"\n",
     "count_vowels", "def check(candidate):\n    assert candidate('Hello') == 2\n    assert candidate('xyz') == 0\n    assert candidate('AEIOU') == 5\n"),
    ("def first_item(values: list[int]) -> int:\n    \"\"\"Return the first element of a non-empty list.\"\"\"\n", "first_item",
     "def check(candidate):\n    assert candidate([4, 5]) == 4\n    assert candidate([9]) == 9\n"),
    ("def total(values: list[int]) -> int:\n    \"\"\"Return the sum of the numbers in values.\"\"\"\n", "total",
     "def check(candidate):\n    assert candidate([1, 2, 3]) == 6\n    assert candidate([]) == 0\n"),
]  # fmt: skip


def _jsonl(path: Path) -> list[dict[str, Any]]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _math(count: int) -> list[dict[str, Any]]:
    seeds = [
        {
            "item": f"demo/{s['id']}",
            "question": s["instruction"],
            "reference": reference_answer(s["response"], stated=False),
        }
        for s in _jsonl(REPO / "demo" / "seeds" / "math.jsonl")
    ]
    test = [
        {
            "item": f"gsm8k-test/{i}",
            "question": s["question"],
            "reference": reference_answer(s["answer"], stated=False),
        }
        for i, s in enumerate(_jsonl(data_file("gsm8k")))
    ]
    easy = [{"item": f"easy/{i}", "question": q, "reference": a} for i, (q, a) in enumerate(EASY_MATH)]
    return (easy + seeds + test)[:count]


def _code(count: int) -> list[dict[str, Any]]:
    seeds = [
        {
            "item": f"demo/{s['id']}",
            "question": s["instruction"],
            "tests": s["tests"],
            "entry_point": s["entry_point"],
        }
        for s in _jsonl(REPO / "demo" / "seeds" / "code.jsonl")
    ]
    humaneval = [
        {"item": s["task_id"], "question": s["prompt"], "tests": s["test"], "entry_point": s["entry_point"]}
        for s in _jsonl(data_file("humaneval"))
    ]
    easy = [
        {"item": f"easy/{entry}", "question": q, "tests": t, "entry_point": entry}
        for q, entry, t in EASY_CODE
    ]
    return (easy + seeds + humaneval)[:count]


def _procedural(count: int) -> list[dict[str, Any]]:
    per_family = max(1, count // len(FAMILIES))
    return [
        {
            "item": row["id"],
            "question": row["instruction"],
            "reference": row.get("answer"),
            "family": row["metadata"]["source_dataset"],
            "metadata": row["metadata"],
        }
        for row in draw_seed_rows(FAMILIES, per_family, seed=0)
    ]


def _items(source: str, count: int) -> list[dict[str, Any]]:
    return {"gen-math": _math, "gen-code": _code, "gen-procedural": _procedural}[source](count)


def generated_table(source: str, count: int, samples: int, engine: Engine, max_tokens: int = 256) -> pa.Table:
    """``samples`` generator replies to each of ``count`` items of ``source``, one row per reply."""
    items = _items(source, count)
    respond = template("respond_code")
    asked: Sequence[str] = [
        respond.render(prompt=item["question"]) if source == "gen-code" else item["question"]
        for item in items
    ]
    params = SamplingParams(n=samples, temperature=0.7, top_p=0.95, max_tokens=max_tokens, seed=0)
    replies = engine.chat([[{"role": "user", "content": text}] for text in asked], params)
    rows = []
    for item, prompt, group in zip(items, asked, replies, strict=True):
        reference = reference_record(
            answer=item.get("reference"),
            source="procedural" if item.get("family") else "answer",
            family=item.get("family"),
            metadata=item.get("metadata"),
        )
        for completion in group:
            rows.append(
                {
                    "source": source,
                    "item": item["item"],
                    "prompt": prompt,
                    "response": completion.text,
                    "reference": reference,
                    "tests": item.get("tests"),
                    "entry_point": item.get("entry_point"),
                    "provenance": {
                        "method": "response",
                        "model": engine.model_id,
                        "engine": engine.backend,
                        "finish_reason": completion.finish_reason,
                    },
                }
            )
    return pa.Table.from_pylist(rows, schema=SCHEMA)
