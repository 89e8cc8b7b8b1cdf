"""Semantic dedup with the bundled MiniLM (one model for the module): paraphrased instructions merge
with the representative recorded, same-template tasks do not, published tasks are found, and the
diversity figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ptfactory.filters.dedup.semantic import PublishedPrompts, SemanticDedupConfig, semantic_dedup_samples
from ptfactory.filters.dedup.semantic_check import check_pairs
from ptfactory.filters.dedup.semantic_diversity import diversity, vendi_score
from ptfactory.filters.dedup.semantic_model import MiniLM, encoder
from ptfactory.storage.schema import from_records, sample_id

# A paraphrase family (the first carries the reference: it represents the task; the second is the
# issue's own example) and distinct tasks on the same templates: another operation, another number, another
# name, another subject. None of these sentences is in bench/data/paraphrase_tasks.json.
FAMILY = (
    "Write a Python function that returns the sum of a list.",
    "Implement a function which computes the total of the numbers in a list.",
    "Give me Python code for a function that sums a list.",
    "Create a function that adds up all the values in a list and returns the total.",
)
SIBLINGS = (
    "Write a Python function that returns the product of a list.",
    "Write a Python function that returns the maximum of a list.",
    "A train travels 240 km in 3 hours. What is its average speed?",
    "A train travels 300 km in 4 hours. What is its average speed?",
    "Nina has 7 marbles and buys 5 more. How many marbles does Nina have now?",
    "Omar has 7 marbles and buys 5 more. How many marbles does Omar have now?",
    "Write a haiku about the moon.",
    "Write a haiku about the sun.",
)
PARAPHRASE = FAMILY[:2]
SIBLING = SIBLINGS[0]


@pytest.fixture(scope="module")
def model() -> MiniLM:
    return encoder()


def _row(prompt: str, answer: str = "ok", method: str = "self_instruct", kind: str = "sft") -> dict[str, Any]:
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    return {
        "sample_id": sample_id(kind, messages),
        "batch": "b1",
        "kind": kind,
        "messages": messages,
        "provenance": {"method": method, "seed_task_id": prompt[:10]},
    }


def test_paraphrase_family_merged_into_its_representative_and_template_siblings_kept(model: MiniLM) -> None:
    rows = [_row(FAMILY[1]), _row(FAMILY[0], "def f(xs): return sum(xs)", method="reference")]
    rows += [_row(p) for p in FAMILY[2:]] + [_row(p) for p in SIBLINGS]
    rows.append(_row(FAMILY[1], "another answer"))  # the same instruction twice: one task, both rows go
    table = from_records(rows)
    out, stats = semantic_dedup_samples(table, SemanticDedupConfig(), model=model)
    trail = [d[-1] if d else None for d in out.column("decisions").to_pylist()]
    kept_id = rows[1]["sample_id"]  # the reference row represents its task
    family_rows = [0, 2, 3, len(rows) - 1]
    for i in family_rows:
        assert (trail[i]["verdict"], trail[i]["reason"]) == ("drop", "semantic_duplicate"), rows[i][
            "messages"
        ]
        detail = json.loads(trail[i]["detail"])
        assert detail["of"] == kept_id and detail["similarity"] >= SemanticDedupConfig().threshold
    assert (trail[1]["verdict"], trail[1]["reason"]) == ("keep", "semantic_representative")
    assert json.loads(trail[1]["detail"]) == {"merged": 3}
    for i in range(4, 4 + len(SIBLINGS)):  # another task on a shared template: untouched
        assert trail[i] is None, rows[i]["messages"][0]["content"]
    assert stats.tasks == 4 + len(SIBLINGS) and stats.merged == 3 and stats.dropped_rows == 4


def test_a_row_a_verifier_can_check_represents_its_task(model: MiniLM) -> None:
    """A seed's response carrying the reference answer and a self-instruct paraphrase of the same
    question without one: the checkable row stays, whatever the sample ids' order (the paraphrase
    used to win on a lower id, and the batch lost its only verifiable row)."""
    question = "Nina has 7 marbles and buys 5 more. How many marbles does Nina have now?"
    paraphrase = "Nina owns 7 marbles and then buys 5 more marbles. How many marbles does Nina have now?"
    for answer_on in (0, 1):
        rows = [_row(question, "12", method="response"), _row(paraphrase, "12", method="self_instruct")]
        rows[answer_on]["sample_id"], rows[1 - answer_on]["sample_id"] = (
            "f" * 64,
            "0" * 64,
        )  # checkable: higher
        rows[answer_on]["reference"] = {"answer": "12", "source": "answer"}
        out, stats = semantic_dedup_samples(from_records(rows), SemanticDedupConfig(), model=model)
        trail = [d[-1] for d in out.column("decisions").to_pylist()]
        assert stats.merged == 1, [t["reason"] for t in trail]
        assert trail[answer_on]["reason"] == "semantic_representative"
        assert trail[1 - answer_on]["reason"] == "semantic_duplicate"


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        (SIBLINGS[2], SIBLINGS[3], "numbers"),
        (SIBLINGS[4], SIBLINGS[5], "names"),
        (FAMILY[0], SIBLINGS[0], "substitution"),
        ("Implement is_even(n) for an integer n.", "Implement is_odd(n) for an integer n.", "functions"),
        (  # agent tasks worded alike (cosine 0.59): other files, other identifiers
            "Some tests in test_calc.py fail. Find the bug in calc.py and fix it so that `python3 -m unittest` "
            "passes. Do not edit the tests.",
            "Rename the function `slugify_text` to `slugify` everywhere in the project (its definition and "
            "every use), so that `python3 -m unittest` passes.",
            "identifiers",
        ),
        (
            "Write a function that converts a temperature from Celsius to Fahrenheit.",
            "Write a function that converts a temperature from Fahrenheit to Celsius.",
            "swapped",
        ),
    ],
)
def test_pair_check_names_why_two_close_instructions_are_two_tasks(
    model: MiniLM, a: str, b: str, reason: str
) -> None:
    config = SemanticDedupConfig()
    (verdict,) = check_pairs([(a, b)], model.encode, config.min_alignment, config.min_substitution)
    assert (verdict.same, verdict.reason) == (False, reason)
    (same,) = check_pairs([(a, a.replace("Write", "Please write"))], model.encode, 0.6, 0.9)
    assert same.same and same.reason == "paraphrase"


def test_new_wording_of_a_published_task_is_dropped(tmp_path: Path, model: MiniLM) -> None:
    published = PublishedPrompts(tmp_path)
    assert published.add(from_records([_row(PARAPHRASE[0])]), model) == 1
    batch = from_records([_row(PARAPHRASE[1]), _row(SIBLING)])
    out, stats = semantic_dedup_samples(
        batch, SemanticDedupConfig(), published=PublishedPrompts(tmp_path), model=model
    )
    trail = [d[-1] if d else None for d in out.column("decisions").to_pylist()]
    assert trail[0]["reason"] == "semantic_duplicate" and json.loads(trail[0]["detail"])["published"] is True
    assert trail[1] is None and stats.published_matches == 1
    again = from_records([_row(PARAPHRASE[0], "again")])  # the same instruction again is MinHash's business
    out, stats = semantic_dedup_samples(
        again, SemanticDedupConfig(), published=PublishedPrompts(tmp_path), model=model
    )
    assert out.column("decisions").to_pylist() == [[]] and stats.published_matches == 0


def test_diversity_figures(model: MiniLM) -> None:
    table = from_records(
        [
            _row(PARAPHRASE[0]),
            _row(PARAPHRASE[1]),
            _row(SIBLING, kind="code"),
            _row("Write a haiku about rain."),
        ]
    )
    figures = diversity(table, model)
    assert figures["rows"] == 4 and figures["instructions"] == 4 and figures["clusters"] == 3  # one merge
    assert figures["kinds"] == {"sft": 3, "code": 1} and figures["sources"] == {"self_instruct": 4}
    assert 0 < figures["dispersion"] < 1 and 1 < figures["vendi"] < 4
    assert 0 < figures["distinct_2_instructions"] <= 1


def test_vendi_score_counts_effective_items(model: MiniLM) -> None:
    same = model.encode(["a cat", "a cat", "a cat"])
    assert vendi_score(same) == pytest.approx(1.0, abs=1e-3)
    assert vendi_score(model.encode(["a cat", "stock market crash", "quantum field theory"])) > 2.0


def test_rows_answering_one_instruction_are_one_task_however_their_prompts_read(model: MiniLM) -> None:
    """A code problem's sampled answers are asked inside the responder's template; its reference holds
    the bare problem. Same parent instruction: one task, never each other's semantic duplicate."""
    stub = 'def running_max(values: list[int]) -> list[int]:\n    """Return the running maximum."""\n'
    templated = (
        f"Complete the following Python function. Reply with the complete function.\n\n```python\n{stub}```"
    )
    rows = [
        {
            **_row(stub, "    return values", method="reference", kind="code"),
            "provenance": {"method": "reference", "parent_id": "p1"},
        },
        {
            **_row(templated, "def running_max(v): ...", method="response", kind="code"),
            "provenance": {"method": "response", "parent_id": "p1"},
        },
    ]
    out, stats = semantic_dedup_samples(from_records(rows), SemanticDedupConfig(), model=model)
    assert stats.tasks == 1 and stats.dropped_rows == 0
    assert not [d for r in out.to_pylist() for d in r["decisions"] or [] if d["stage"] == "semantic_dedup"]
