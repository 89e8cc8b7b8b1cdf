"""Difficulty: every reason reached by a real batch — code through the real sandbox (execution,
then the student's attempts), math by final number, IFD bands on real models, truncation."""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ptfactory.annotators.pairs import auto_pairs
from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.filters.difficulty import DifficultyConfig, final_number, ifd_band, score_difficulty
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.validate import validate_samples
from ptfactory.storage.schema import from_records, sample_id, validate_table

REPO = Path(__file__).resolve().parents[2]


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
    """Answers each prompt with fixed texts, in turn (a scripted student for the pass-rate logic)."""

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


def _code(
    name: str, body: str, tests: str, parent: str | None = None, finish: str = "stop"
) -> dict[str, object]:
    return _row(
        f"def {name}(x):\n",
        body,
        "code",
        tests=tests,
        entry_point=name,
        provenance={
            "method": "response",
            "parent_id": parent or f"instruction-{name}",
            "finish_reason": finish,
        },
    )


def _tests(expected: str) -> str:
    """Three asserts of candidate(x) == expected(x), for x in 0, 1, 2."""
    return "def check(candidate):\n" + "".join(
        f"    assert candidate({x}) == {eval(expected, {'x': x})}\n" for x in (0, 1, 2)
    )


def test_code_reasons_through_the_real_sandbox() -> None:
    """Execution records, difficulty decides: too_easy, hard (kept), in_band, unsolvable, a wrong
    answer to a solvable problem, truncated; then the attempts it kept make pass-over-fail pairs."""
    rows = [
        _code("double", "    return 2 * x\n", _tests("2 * x")),  # the student always solves it
        _code("triple", "    return 3 * x\n", _tests("3 * x")),  # the student never does
        _code("half", "    return x // 2\n", _tests("x // 2")),  # 2 of 4 attempts pass
        _code("broken", "    return x\n", _tests("x + 7")),  # nothing passes
        _code("neg", "    return -x\n", _tests("-x"), parent="p-neg"),  # a reference that passes...
        _code("neg", "    return x\n", _tests("-x"), parent="p-neg"),  # ...and a sampled answer that fails
        _code("square", "    return x + x\n", _tests("x * x")),  # fails; a student attempt passes
        _code("cube", "    return x ** 3\n", _tests("x ** 3"), finish="length"),  # passes, but was cut
    ]
    student = Student(
        model_id="student",
        answers={
            "double": ["    return x * 2\n"],
            "triple": ["    return x\n", "    while True:\n        pass\n"],  # wrong, or a hang
            "half": ["    return x // 2\n", "    return x\n"],
            "broken": ["    return 0\n"],
            "neg": ["    return 0\n"],
            "square": ["    return x * x\n", "    return 1\n", "    return 1\n", "    return 1\n"],
            "cube": ["    return x ** 3\n"],
        },
    )
    config = DifficultyConfig(methods={"code": "pass_rate"}, k=4, max_pass_rate=0.75)
    with DockerSandbox(Limits(timeout_s=5), workers=2) as sandbox:
        executed, _ = validate_samples(from_records(rows), sandbox)
        table, stats = score_difficulty(executed, student, sandbox, config)
    validate_table(table)
    out = table.to_pylist()
    last = [(r["decisions"][-1]["verdict"], r["decisions"][-1]["reason"]) for r in out]
    assert last == [
        ("drop", "too_easy"),
        ("keep", "hard"),
        ("keep", "in_band"),
        ("drop", "unsolvable"),
        ("keep", "hard"),
        ("drop", "execution_failed"),
        ("drop", "execution_failed"),
        ("drop", "truncated"),
    ]
    assert [r["scores"]["difficulty"]["value"] for r in out] == [0.0, 1.0, 0.5, 1.0, 1.0, 1.0, 0.75, None]
    assert stats.dropped == {"too_easy": 1, "unsolvable": 1, "execution_failed": 2, "truncated": 1}
    assert out[5]["decisions"][-1]["detail"].endswith("while the problem is solvable")  # the reference passed
    # the attempts kept for pairs: the failing one closest to passing (`return x` holds 1 of 3; a hang none)
    triple = json.loads(out[1]["scores"]["difficulty"]["detail"])
    assert (triple["solved"], triple["k"], triple["passing"]) == (0, 4, None)
    assert triple["failing"]["text"] == "    return x\n"
    assert (triple["failing"]["assertions_passed"], triple["failing"]["assertions_total"]) == (1, 3)
    square = json.loads(out[6]["scores"]["difficulty"]["detail"])
    assert square["passing"]["text"] == "    return x * x\n" and square["passing"]["status"] == "passed"

    pairs = {
        (p["decisions"][-1]["reason"], p["chosen"][0]["content"], p["rejected"][0]["content"])
        for p in auto_pairs(out)
    }
    assert pairs == {
        ("execution_pass_vs_student_fail", "    return 3 * x\n", "    return x\n"),
        ("execution_pass_vs_student_fail", "    return x // 2\n", "    return x\n"),
        ("execution_pass_vs_student_fail", "    return -x\n", "    return 0\n"),
        ("execution_pass_vs_fail", "    return -x\n", "    return x\n"),
        ("student_pass_vs_execution_fail", "    return x * x\n", "    return x + x\n"),
    }


def test_failing_code_is_decided_without_student_attempts() -> None:
    """A code row whose solution fails is dropped even where code difficulty is switched off."""
    rows = [
        _code("inc", "    return x + 1\n", _tests("x + 1")),
        _code("dec", "    return x\n", _tests("x - 1")),
        _code("dec", "    return x - 1\n", _tests("x - 1"), parent="instruction-dec"),
    ]
    rows[0]["scores"] = {"execution": {"status": "passed"}}
    rows[1]["scores"] = {"execution": {"status": "failed"}}
    rows[2]["scores"] = {"execution": {"status": "passed"}}
    rows.append(_code("noop", "    pass\n", _tests("x")))
    rows[3]["scores"] = {"execution": {"status": "timeout"}}
    rows.append(_code("crash", "    pass\n", _tests("x")))
    rows[4]["scores"] = {"execution": {"status": "sandbox_error"}}
    table, stats = score_difficulty(
        from_records(rows), Student(model_id="unused"), None, DifficultyConfig(methods={"code": "none"})
    )
    assert [r["decisions"][-1]["reason"] for r in table.to_pylist()] == [
        "not_scored",
        "execution_failed",
        "not_scored",
        "unsolvable",
        "execution_sandbox_error",
    ]
    assert stats.dropped == {"execution_failed": 1, "unsolvable": 1, "execution_sandbox_error": 1}


def test_math_pass_rate_and_truncation() -> None:
    rows = [
        _row("Easy sum?", "2 + 2 = 4\n#### 4"),
        _row("Hard sum?", "work...\n#### 99"),
        _row("Cut sum?", "first we add", provenance={"finish_reason": "length"}),
    ]
    student = Student(
        model_id="student", answers={"Easy": ["#### 4"], "Hard": ["#### 12", "#### 98"], "Cut": ["#### 1"]}
    )
    table, stats = score_difficulty(
        from_records(rows), student, None, DifficultyConfig(methods={"sft": "pass_rate"})
    )
    out = table.to_pylist()
    assert [r["decisions"][-1]["reason"] for r in out] == ["too_easy", "in_band", "truncated"]
    assert [r["scores"]["difficulty"]["value"] for r in out] == [0.0, 1.0, None]
    assert stats.dropped == {"too_easy": 1, "truncated": 1}


def test_ifd_band_quantiles_need_enough_rows() -> None:
    config = DifficultyConfig(ifd_low_quantile=0.25, ifd_high_quantile=0.75, ifd_band_min_rows=8)
    assert ifd_band([0.2, 0.5, 0.9], config) == (0.0, 1.0)  # too few rows: the absolute band
    low, high = ifd_band([0.1 * i for i in range(1, 10)], config)  # 0.1 .. 0.9
    assert low == pytest.approx(0.3) and high == pytest.approx(0.7)
    assert (
        ifd_band([0.5 + 0.1 * i for i in range(9)], DifficultyConfig(ifd_band_min_rows=8))[1] == 1.0
    )  # ifd_max


def _references() -> list[tuple[str, str]]:
    """The demo seeds' SFT instructions with their reference answers (GSM8K and handwritten)."""
    pairs = []
    for name in ("gsm8k.jsonl", "handwritten.jsonl"):
        for line in (REPO / "demo" / "seeds" / name).read_text().splitlines():
            seed = json.loads(line)
            if seed.get("response") and seed.get("kind", "sft") == "sft":
                prompt = seed["instruction"] + (f"\n\n{seed['input']}" if seed.get("input") else "")
                pairs.append((prompt, seed["response"]))
    return pairs


@pytest.mark.slow
def test_ifd_band_on_the_bundled_model(smollm2: Path) -> None:
    """A realistic batch: the demo's references, and the same answers under another instruction
    (an answer the instruction does not help predict). The default band drops both ends."""
    refs = _references()[:10]  # 20 rows: the fewest the quantile band is drawn from
    assert len(refs) == 10
    matched = [_row(p, a) for p, a in refs]
    shuffled = [_row(p, refs[(i + 1) % len(refs)][1]) for i, (p, _) in enumerate(refs)]
    student = TransformersEngine(model_id="SmolLM2-135M-Instruct", model_path=str(smollm2))
    table, stats = score_difficulty(from_records(matched + shuffled), student, None, DifficultyConfig())
    out = table.to_pylist()
    value = {r["sample_id"]: r["scores"]["difficulty"]["value"] for r in out}
    reason = {r["sample_id"]: r["decisions"][-1]["reason"] for r in out}
    assert stats.ifd_band is not None
    low, high = stats.ifd_band
    assert low > 0 and high == 1.0  # the batch's 10th percentile, and the absolute ceiling
    # the instruction helps predict its own answer more than another's, row for row
    assert all(value[m["sample_id"]] < value[s["sample_id"]] for m, s in zip(matched, shuffled, strict=True))
    for sid, v in value.items():
        expected = "too_easy" if v < low else "instruction_unhelpful" if v >= high else "in_band"
        assert reason[sid] == expected, (sid, v, stats.ifd_band)
    assert stats.dropped["too_easy"] == sum(1 for v in value.values() if v < low) >= 2
    assert stats.dropped["instruction_unhelpful"] >= 1
    assert all(reason[m["sample_id"]] != "instruction_unhelpful" for m in matched)


def test_ifd_absolute_band_on_a_small_batch(tiny_model: Path) -> None:
    rows = [
        _row("write a python function that returns the sum of two numbers", "the quick brown fox"),
        _row("what is the capital of france?", "paris is the capital of france."),
    ]
    student = TransformersEngine(model_id="tiny", model_path=str(tiny_model))
    loose, stats = score_difficulty(
        from_records(rows), student, None, DifficultyConfig(methods={"sft": "ifd"}, ifd_max=1000.0)
    )
    values = [r["scores"]["difficulty"]["value"] for r in loose.to_pylist()]
    assert stats.ifd_band == (0.0, 1000.0)  # two rows: no quantiles
    assert [r["decisions"][-1]["reason"] for r in loose.to_pylist()] == ["in_band", "in_band"]
    assert values[0] != values[1]
    strict, _ = score_difficulty(
        from_records(rows),
        student,
        None,
        DifficultyConfig(methods={"sft": "ifd"}, ifd_min=min(values) + 1e-9, ifd_max=max(values)),
    )
    by_value = {v: r["decisions"][-1]["reason"] for v, r in zip(values, strict.to_pylist(), strict=True)}
    assert by_value == {min(values): "too_easy", max(values): "instruction_unhelpful"}
