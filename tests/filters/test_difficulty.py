"""Difficulty: pass rate (math by final number, code in the real sandbox) and IFD on a real model."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.filters.difficulty import DifficultyConfig, final_number, score_difficulty
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.storage.schema import from_records, sample_id, validate_table


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("so 3 + 4 = 7.\n#### 7", 7.0),
        ("The answer is 1,234.", 1234.0),
        ("#### -2.5", -2.5),
        ("no number", None),
        ("It took 5 days and cost $18", 18.0),
    ],
)
def test_final_number(text: str, value: float | None) -> None:
    assert final_number(text) == value


@dataclass
class Student(Engine):
    """Answers each prompt with fixed texts (a scripted student for the pass-rate logic)."""

    answers: dict[str, list[str]] = field(default_factory=dict)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        out = []
        for conv in conversations:
            texts = next(v for k, v in self.answers.items() if k in conv[-1]["content"])
            out.append([Completion(texts[i % len(texts)], 10, 5) for i in range(params.n)])
        return out


def _row(prompt: str, answer: str, kind: str = "sft", **extra: object) -> dict[str, object]:
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    return {
        "sample_id": sample_id(
            kind, messages, tests=extra.get("tests"), entry_point=extra.get("entry_point")
        ),  # type: ignore[arg-type]
        "batch": "b",
        "kind": kind,
        "messages": messages,
        "decisions": [],
        **extra,
    }


def test_pass_rate_for_math_and_code() -> None:
    tests = "def check(candidate):\n    assert candidate(2) == 4\n"
    rows = [
        _row("Easy sum?", "2 + 2 = 4\n#### 4"),
        _row("Hard sum?", "work...\n#### 99"),
        _row(
            "def double(x):\n",
            "    return 2 * x\n",
            "code",
            tests=tests,
            entry_point="double",
            scores={"execution": {"status": "passed", "exit_code": 0}},
        ),
        _row(
            "def broken(x):\n",
            "    return x\n",
            "code",
            tests=tests.replace("candidate", "candidate", 1).replace("double", "broken"),
            entry_point="broken",
            scores={"execution": {"status": "failed", "exit_code": 1}},
        ),
    ]
    student = Student(
        model_id="student",
        answers={
            "Easy": ["#### 4"],
            "Hard": ["#### 12", "#### 98"],
            "double": ["```python\ndef double(x):\n    return x * 2\n```", "    return x - 2\n"],
            "broken": ["    return 0\n"],
        },
    )
    config = DifficultyConfig(methods={"sft": "pass_rate", "code": "pass_rate"}, k=4, max_pass_rate=0.75)
    with DockerSandbox(Limits(timeout_s=5)) as sandbox:
        table, stats = score_difficulty(from_records(rows), student, sandbox, config)
    validate_table(table)
    out = table.to_pylist()
    assert [r["decisions"][-1]["reason"] for r in out] == ["too_easy", "in_band", "in_band", "unsolvable"]
    assert [r["scores"]["difficulty"]["value"] for r in out] == [0.0, 1.0, 0.5, 1.0]
    assert out[2]["scores"]["difficulty"]["detail"] == "student solved 2/4"
    assert stats.dropped == {"too_easy": 1, "unsolvable": 1}


def test_ifd_on_a_real_model(tiny_model: Path) -> None:
    rows = [
        _row("write a python function that returns the sum of two numbers", "the quick brown fox"),
        _row("what is the capital of france?", "paris is the capital of france."),
    ]
    student = TransformersEngine(model_id="tiny", model_path=str(tiny_model))
    table, stats = score_difficulty(
        from_records(rows),
        student,
        None,
        DifficultyConfig(methods={"sft": "ifd"}, ifd_min=0.0, ifd_max=1000.0),
    )
    values = [r["scores"]["difficulty"]["value"] for r in table.to_pylist()]
    assert all(v is not None and v > 0 for v in values)
    assert stats.methods == {"ifd": 2}
    strict, _ = score_difficulty(
        from_records(rows),
        student,
        None,
        DifficultyConfig(methods={"sft": "ifd"}, ifd_min=min(values) + 1e-9, ifd_max=max(values)),
    )
    assert sorted(r["decisions"][-1]["reason"] for r in strict.to_pylist()) == [
        "instruction_unhelpful",
        "too_easy",
    ]
