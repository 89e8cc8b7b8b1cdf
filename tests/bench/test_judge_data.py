"""The judge bench's labelled pairs really differ: wrong numbers are wrong, mutants fail their tests."""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from bench.judge_data import (
    MUTATORS,
    gsm8k_pairs,
    humaneval_pairs,
    mutants,
    to_table,
    writingbench_pairs,
    writingbench_queries,
    wrong_number,
)
from ptfactory.annotators.judges.weights import auc, auc_interval
from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.filters.execution import Job, Limits, Sandbox, open_sandbox
from ptfactory.filters.execution.programs import program


def test_wrong_number_changes_the_answer_and_the_last_step_only() -> None:
    solution = "She has 16 - 3 = <<16-3=13>>13 eggs.\nShe makes 13 * 2 = $<<13*2=26>>26.\n#### 26"
    good, bad, wrong = wrong_number(solution, random.Random(0))
    assert good == "She has 16 - 3 = 13 eggs.\nShe makes 13 * 2 = $26.\nThe answer is 26."
    assert wrong != "26" and bad == good.replace("26", wrong)


def test_gsm8k_pairs_differ_in_their_final_number() -> None:
    pairs = gsm8k_pairs(30)
    assert len(pairs) == 30 and len({p.item for p in pairs}) == 30
    for pair in pairs:
        good = re.search(r"The answer is (-?[\d,]+)\.$", pair.good)
        bad = re.search(r"The answer is (-?[\d,]+)\.$", pair.bad)
        assert good and bad and good.group(1) != bad.group(1)
        assert "<<" not in pair.good and "####" not in pair.good
        assert pair.good.splitlines()[:-2] == pair.bad.splitlines()[:-2]  # the same steps up to the last
    assert gsm8k_pairs(5) == pairs[:5]  # seeded: the same items every run


def test_every_mutation_operator_yields_a_mutant_that_parses() -> None:
    source = (
        "def f(xs, t):\n"
        '    """Docstring stays."""\n'
        "    total = 0\n"
        "    for x in xs:\n"
        "        if x > t and x != 3:\n"
        "            total += x * 2\n"
        "    return total == 4 or False\n"
    )
    seen: dict[str, list[str]] = {}
    for operator, code in mutants(source, "f"):
        ast.parse(code)
        assert code != ast.unparse(ast.parse(source)) and "Docstring stays." in code
        seen.setdefault(operator, []).append(code)
    assert set(seen) == set(MUTATORS)
    expected = {
        "flip_compare": "x <= t",
        "off_by_one": "total = 1",
        "wrong_return": "return 0",
        "swap_arith": "total -= x",
        "swap_bool": "x > t or x != 3",
        "negate_if": "if not (x > t and x != 3)",
    }
    for operator, text in expected.items():
        assert any(text in code for code in seen[operator]), (operator, seen[operator])


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with open_sandbox(Limits(timeout_s=5)) as box:
        yield box


def _passes(sandbox: Sandbox, code: str, tests: str, entry: str) -> bool:
    return sandbox.run_many([Job({"program.py": program(code, tests, entry)})])[0].passed


def test_humaneval_mutants_fail_the_tests_the_canonical_solution_passes(sandbox: Sandbox) -> None:
    pairs = humaneval_pairs(6, sandbox, Limits(timeout_s=5))
    assert len(pairs) == 6
    assert len({p.how for p in pairs}) >= 3  # the operators take turns
    for pair in pairs:
        good, bad = (
            pair.good.strip("`\n").removeprefix("python\n"),
            pair.bad.strip("`\n").removeprefix("python\n"),
        )
        assert pair.tests and pair.entry_point and good != bad
        assert _passes(sandbox, good, pair.tests, pair.entry_point), pair.item
        assert not _passes(sandbox, bad, pair.tests, pair.entry_point), (pair.item, pair.how)
        # only the mutated lines differ: the same text otherwise (no formatting gives the label away)
        assert sum(a != b for a, b in zip(good.splitlines(), bad.splitlines(), strict=True)) == 1


class _Echo(Engine):
    """Answers each query with a sentence about it, so each response belongs to its query."""

    backend = "echo"

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        return [[Completion(f"About: {c[-1]['content'][:60]}", 5, 5)] for c in conversations]


@dataclass
class Canned(Engine):
    """Gives the same replies to every question (``n`` of them, in order)."""

    replies: list[str] = field(default_factory=list)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        return [
            [Completion(self.replies[k % len(self.replies)], 5, 5) for k in range(params.n)]
            for _ in conversations
        ]


def test_writingbench_pairs_swap_responses_across_kinds() -> None:
    queries = writingbench_queries(6)
    assert len({q["domain1"] for q in queries}) == 6
    pairs = writingbench_pairs(6, _Echo(model_id="echo"))
    assert len(pairs) == 6
    for pair in pairs:
        assert pair.good == f"About: {pair.prompt[:60]}".strip() and pair.bad != pair.good


def test_to_table_gives_two_labelled_rows_per_pair() -> None:
    table = to_table(gsm8k_pairs(3))
    assert table.num_rows == 6
    assert table.column("label").to_pylist() == [1, 0] * 3 and table.column("pair").to_pylist() == [
        0,
        0,
        1,
        1,
        2,
        2,
    ]


def test_auc_matches_scikit_learn_with_ties_and_weights_and_the_interval_holds_it() -> None:
    """The bench and the panel share one AUC (annotators/judges/weights.py)."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    good, bad = rng.normal(1, 1, 40).round(1), rng.normal(0, 1, 40).round(1)  # rounded: ties too
    scores, labels = np.r_[good, bad], np.r_[np.ones(40), np.zeros(40)].astype(bool)
    weights = rng.uniform(0.5, 4, 80)
    assert auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores))
    assert auc(scores, labels, weights) == pytest.approx(roc_auc_score(labels, scores, sample_weight=weights))
    interval = auc_interval(scores, labels)
    assert interval is not None and interval[0] < auc(scores, labels) < interval[1]  # type: ignore[operator]
    assert auc_interval(scores, labels) == interval  # seeded: a rerun gives the same interval
    assert auc(np.array([3.0, 4.0, 1.0, 2.0]), np.array([True, True, False, False])) == 1.0
    assert auc(np.array([1.0]), np.array([True])) is None  # one class: undefined


def test_generated_rows_carry_what_their_verifiers_need_and_the_verifiers_label_them() -> None:
    """The factory's own replies (a fake generator here) to the demo's math seeds: each row keeps its
    reference and who wrote it; ``ptf judge``'s table path labels them by the answer verifier, and
    the generator's family would abstain as a judge of them."""
    from bench.judge_generated import generated_table
    from ptfactory.annotators.judges import Panel, VerifierSet
    from ptfactory.annotators.judges.standalone import score_table

    replies = ["Let me think. #### 7", "The answer is 17.", "I am not sure."]
    table = generated_table("gen-math", 2, 3, Canned(model_id="SmolLM2-135M-Instruct", replies=replies))
    assert table.num_rows == 6 and set(table.column("source").to_pylist()) == {"gen-math"}
    first = table.to_pylist()[0]
    assert first["reference"]["answer"] == "7" and first["provenance"]["model"] == "SmolLM2-135M-Instruct"
    scored, _ = score_table(table, Panel([], VerifierSet([("answer", "answer")])), prompt_column="prompt")
    assert scored.column("verdict_answer").to_pylist()[:3] == ["pass", "fail", "no_answer"]
