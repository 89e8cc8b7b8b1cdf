import pytest

from ptfactory.generators.novelty import NoveltyFilter, rouge_l
from ptfactory.generators.records import parse_code_problem, parse_instruction


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Task: Write a haiku about autumn leaves.", "Write a haiku about autumn leaves."),
        (
            "Sure! Here is one.\nTask: Explain how tides work to a child.",
            "Explain how tides work to a child.",
        ),
        (
            "**New Task:** Plan a three-day trip to Rome.\nTask: another one here",
            "Plan a three-day trip to Rome.",
        ),
        ("Describe the water cycle in two paragraphs.", "Describe the water cycle in two paragraphs."),
    ],
)
def test_instruction_parsing(reply: str, expected: str) -> None:
    assert parse_instruction(reply) == (expected, None)


@pytest.mark.parametrize(
    ("reply", "reason"), [("", "empty_reply"), ("   \n ", "empty_reply"), ("Task: Hi", "too_short")]
)
def test_instruction_parse_failures_have_reasons(reply: str, reason: str) -> None:
    assert parse_instruction(reply) == (None, reason)


GOOD = '''Here you go:
```python
def double(x: int) -> int:
    """Return twice x."""
```

```python
def check(candidate):
    assert candidate(2) == 4
```'''


def test_code_problem_parsing() -> None:
    problem, reason = parse_code_problem(GOOD)
    assert reason is None and problem is not None
    assert problem["entry_point"] == "double"
    assert "def check(candidate)" in problem["tests"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("no code here", "missing_code_blocks"),
        ("```python\ndef f(:\n```\n```python\ndef check(c): assert 1\n```", "syntax_error"),
        ("```python\nx = 1\n```\n```python\ndef check(c):\n    assert c(1)\n```", "no_function"),
        ("```python\ndef f(): pass\n```\n```python\nassert f() is None\n```", "tests_without_check"),
        ("```python\ndef f(): pass\n```\n```python\ndef check(c):\n    pass\n```", "tests_without_asserts"),
    ],
)
def test_code_problem_parse_failures(reply: str, reason: str) -> None:
    assert parse_code_problem(reply) == (None, reason)


def test_rouge_l_and_novelty() -> None:
    assert rouge_l("the cat sat on the mat", "the cat sat on the mat") == 1.0
    assert rouge_l("a b c d", "x y z") == 0.0
    assert rouge_l("the cat sat", "the cat sat on the mat") == pytest.approx(2 * 1 * 0.5 / 1.5)
    novelty = NoveltyFilter(0.7, ["Write a poem about the sea"])
    assert novelty.check("Write a poem about the sea at night")[0] is False
    novel, score, _ = novelty.check("Explain how a compiler optimizes loops")
    assert novel and score < 0.7
