"""Difficulty: every reason reached by a real batch. Code through the real sandbox (execution, then
the student's attempts; faults the solution causes are failures, the infrastructure's abstain),
answers through the answer verifier (a wrong reference dropped, `hard` only when the row's answer
is verified and every attempt failed by itself), IFD in one chat frame against absolute
thresholds, on the bundled model too."""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ptfactory.annotators.pairs import auto_pairs
from ptfactory.config import parse_config
from ptfactory.engines.base import (
    Completion,
    Conversation,
    Engine,
    Prompt,
    SamplingParams,
    TokenLogprobs,
    failed_completion,
)
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.errors import ConfigError
from ptfactory.filters.difficulty import DifficultyConfig, score_difficulty
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.validate import validate_samples
from ptfactory.filters.verify import AnswerVerifier, MathVerifyPool, reference_record
from ptfactory.filters.verify.mathcheck import Comparison, compare_answers
from ptfactory.generators.seeds import read_seeds
from ptfactory.storage.schema import from_records, sample_id, validate_table
from tests.filters.faults import DyingSandbox

REPO = Path(__file__).resolve().parents[2]
ENGINE_ERROR = "<engine error>"


@dataclass
class Student(Engine):
    """Answers each prompt with fixed texts, in turn (a scripted student for the pass-rate logic)."""

    answers: dict[str, list[str]] = field(default_factory=dict)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        out = []
        for conv in conversations:
            texts = next(v for k, v in self.answers.items() if k in conv[-1]["content"])
            picked = [texts[i % len(texts)] for i in range(params.n)]
            out.append(
                [failed_completion("down") if t == ENGINE_ERROR else Completion(t, 10, 5) for t in picked]
            )
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
    with DockerSandbox(Limits(timeout_s=3), workers=2) as sandbox:
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


def _last(table: object) -> list[tuple[str, str]]:
    return [(r["decisions"][-1]["verdict"], r["decisions"][-1]["reason"]) for r in table.to_pylist()]  # type: ignore[attr-defined]


KILLS_ITS_RUNNER = "    import os, signal\n    os.kill(-1, signal.SIGKILL)\n"
SLEEPS_PAST_THE_LIMIT = "    import time\n    time.sleep(30)\n"


@pytest.mark.integration
def test_solution_faults_are_failures_and_infrastructure_faults_abstain() -> None:
    """The same attempts at a problem whose reference passes: in a working sandbox, an attempt that
    kills its runner and one that sleeps past the limit fail (a control program passes right after
    each), so the row is `hard`; in a sandbox whose every job dies (the control too), they abstain:
    not hard, no pass rate, and the stage's infrastructure share says so."""
    rows = [_code("inc", "    return x + 1\n", _tests("x + 1"))]
    rows[0]["scores"] = {"execution": {"status": "passed"}}
    student = Student(model_id="student", answers={"inc": [KILLS_ITS_RUNNER, SLEEPS_PAST_THE_LIMIT]})
    config = DifficultyConfig(methods={"code": "pass_rate"}, k=2)
    with DockerSandbox(Limits(timeout_s=1), workers=2) as sandbox:
        healthy, healthy_stats = score_difficulty(from_records(rows), student, sandbox, config)
        broken, broken_stats = score_difficulty(
            from_records(rows), student, DyingSandbox(sandbox), config, retries=0
        )
    assert _last(healthy) == [("keep", "hard")]
    attempts = json.loads(healthy.to_pylist()[0]["scores"]["difficulty"]["detail"])
    assert (attempts["solved"], attempts["k"], attempts["abstained"]) == (0, 2, 0)
    assert attempts["failing"]["status"] in ("failed", "timeout")
    assert (healthy_stats.sandbox_runs, healthy_stats.sandbox_infra_errors) == (2, 0)

    assert _last(broken) == [("keep", "not_scored")]
    out = broken.to_pylist()[0]
    assert out["scores"]["difficulty"]["value"] is None
    assert json.loads(out["scores"]["difficulty"]["detail"])["abstained"] == 2
    assert "2 of 2 attempts abstained: infrastructure faults" in out["decisions"][-1]["detail"]
    assert (broken_stats.sandbox_runs, broken_stats.sandbox_infra_errors) == (2, 2)
    assert not broken_stats.gate(0.1).passed and healthy_stats.gate(0.1).passed


def _answer_row(prompt: str, answer: str, reference: str | None = None, **extra: object) -> dict[str, object]:
    ref = reference_record(answer=reference, source="response") if reference is not None else None
    return _row(prompt, answer, reference=ref, **extra)


def _timeout_on_777(gold: str, pred: str, timeout_s: int) -> Comparison:
    """math-verify, except that it times out on the answer 777."""
    return (
        Comparison("timeout", error="timed out") if pred == "777" else compare_answers(gold, pred, timeout_s)
    )


def test_answer_rows_through_the_answer_verifier() -> None:
    rows = [
        _answer_row("Easy sum?", "2 + 2 = 4\n#### 4", "4"),  # every student reproduces it
        _answer_row("Salary?", "She earns $16,000 a year.\n#### 16,000", "16000"),  # one of two does
        _answer_row("Eggs?", "16 * 24 = 384\n#### 384", "18"),  # the row is wrong: students say 18
        _answer_row("Trip?", "It takes 20 days.\n#### 20", "20"),  # verified; both attempts wrong
        _answer_row("Guess?", "#### 99", None),  # nothing to check it against (sft set to pass_rate)
        _answer_row("Slow?", "#### 7", "7"),  # one attempt wrong, one a math-verify timeout
        _answer_row("Engine?", "#### 3", "3"),  # one attempt wrong, one an engine error
        _answer_row("Cut sum?", "first we add", "5", provenance={"finish_reason": "length"}),
    ]
    student = Student(
        model_id="student",
        answers={
            "Easy": ["The answer is 4.", "So we get \\boxed{4}"],
            "Salary": ["So she earns $16,000.", "#### 15000"],
            "Eggs": ["#### 18"],
            "Trip": ["#### 21", "It takes 19 days."],
            "Guess": ["#### 12"],
            "Slow": ["#### 5", "#### 777"],
            "Engine": ["#### 2", ENGINE_ERROR],
            "Cut": ["#### 1"],
        },
    )
    verifier = AnswerVerifier(MathVerifyPool(workers=0, compare=_timeout_on_777))
    table, stats = score_difficulty(
        from_records(rows),
        student,
        None,
        DifficultyConfig(k=2, methods={"sft": "pass_rate", "math": "pass_rate"}),
        verifier=verifier,
    )
    validate_table(table)
    out = table.to_pylist()
    assert _last(table) == [
        ("drop", "too_easy"),
        ("keep", "in_band"),
        ("drop", "reference_wrong"),
        ("keep", "hard"),
        ("keep", "unverified"),
        ("keep", "in_band"),  # 0 of 1 graded: not hard, an abstention is no failure
        ("keep", "in_band"),
        ("drop", "truncated"),
    ]
    assert [r["scores"]["difficulty"]["value"] for r in out] == [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, None]
    assert {r["scores"]["difficulty"]["method"] for r in out[:-1]} == {"pass_rate"}
    detail = [r["decisions"][-1]["detail"] for r in out]
    assert "expected 18, the row says 384" in detail[2]
    assert "1 of 2 attempts abstained: math_verify_timeout" in detail[5] and "not hard" in detail[5]
    assert "1 of 2 attempts abstained: engine_error" in detail[6]
    assert "no reference to check it against" in detail[4]
    assert stats.dropped == {"too_easy": 1, "reference_wrong": 1, "truncated": 1}


def test_an_sft_row_set_to_pass_rate_without_an_answer_falls_back_to_ifd() -> None:
    engine = Scores(model_id="scores", ifd={"Hello there, my good friend, how are you today?": 0.5})
    table, stats = score_difficulty(
        from_records([_row("Greet me.", "Hello there, my good friend, how are you today?")]),
        engine,
        None,
        DifficultyConfig(methods={"sft": "pass_rate"}),
    )
    assert _last(table) == [("keep", "in_band")] and stats.methods == {"ifd": 1}


@dataclass
class Scores(Engine):
    """Scores each response so that its IFD is ``ifd[response]`` (the band logic), and keeps the
    prompts it was asked to score (the frame)."""

    ifd: dict[str, float] = field(default_factory=dict)
    prompts: list[Prompt] = field(default_factory=list)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        raise AssertionError("IFD only scores")

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        self.prompts.extend(prompts)
        out = []
        for prompt, text in zip(prompts, continuations, strict=True):
            free = not isinstance(prompt, str) and prompt[-1]["content"] == ""
            nll = 1.0 if free else 1.0 + math.log(self.ifd[text])
            out.append(TokenLogprobs(["x", "y"], [-nll, -nll]))
        return out


def test_ifd_band_is_absolute_and_both_passes_share_the_frame() -> None:
    """No quota: a batch of twenty rows inside the band loses none (the former 10 % quantile dropped
    two of any twenty); the absolute thresholds decide on either side of them."""
    values = [0.3 + 0.02 * i for i in range(20)] + [0.019, 0.021, 0.89, 0.91, 2.5]
    rows = [_row(f"Question {i}?", f"Answer {i}.") for i in range(len(values))]
    engine = Scores(model_id="scores", ifd={f"Answer {i}.": v for i, v in enumerate(values)})
    config = DifficultyConfig()
    assert (config.ifd_min, config.ifd_max) == (0.02, 0.9)
    table, stats = score_difficulty(from_records(rows), engine, None, config)
    reasons = [reason for _, reason in _last(table)]
    assert reasons[:20] == ["in_band"] * 20
    assert reasons[20:] == [
        "too_easy",
        "in_band",
        "in_band",
        "instruction_unhelpful",
        "instruction_unhelpful",
    ]
    got = [r["scores"]["difficulty"]["value"] for r in table.to_pylist()]
    assert got == pytest.approx(values)
    assert stats.ifd_band == (0.02, 0.9) and stats.dropped == {"too_easy": 1, "instruction_unhelpful": 2}
    # both passes: the response as the assistant turn after one user turn (the instruction, or empty)
    assert all(isinstance(p, list) and [t["role"] for t in p] == ["user"] for p in engine.prompts)
    assert sum(1 for p in engine.prompts if p[0]["content"] == "") == len(rows)  # type: ignore[index]


def test_the_quantile_band_keys_fail_naming_their_replacements() -> None:
    for key, replacement in (("ifd_low_quantile", "ifd_min"), ("ifd_high_quantile", "ifd_max")):
        with pytest.raises(ConfigError, match=rf"difficulty.*'{key}' was removed.*{replacement}"):
            parse_config({"difficulty": {key: 0.1}})
    with pytest.raises(ConfigError, match="ifd_band_min_rows' was removed"):
        parse_config({"difficulty": {"ifd_band_min_rows": 20}})
    with pytest.raises(ConfigError, match="ifd_min"):
        parse_config({"difficulty": {"ifd_min": 1.5, "ifd_max": 1.0}})
    assert parse_config({"difficulty": {"ifd_min": 0.05, "ifd_max": 1.2}}).difficulty.ifd_max == 1.2


@pytest.mark.slow
def test_ifd_on_the_bundled_model_tells_matched_from_mismatched(smollm2: Path) -> None:
    """The demo seeds' reference answers under their own instruction, and under another's (half
    the list away). In one chat frame, every matched answer has IFD under ifd_max (< 1) and is kept;
    the answers under the wrong instruction reach IFD >= 1 (measured: 11 of 12; docs/difficulty.md)
    and are dropped, and each scores higher than under its own instruction."""
    refs = [
        (s.prompt, s.response) for s in read_seeds(REPO / "demo" / "seeds") if s.kind == "sft" and s.response
    ]
    assert len(refs) >= 10
    shift = len(refs) // 2
    matched = [_row(p, a) for p, a in refs]
    mismatched = [_row(refs[(i + shift) % len(refs)][0], a) for i, (_, a) in enumerate(refs)]
    student = TransformersEngine(model_id="SmolLM2-135M-Instruct", model_path=str(smollm2))
    config = DifficultyConfig()
    table, stats = score_difficulty(from_records(matched + mismatched), student, None, config)
    out = {r["sample_id"]: r for r in table.to_pylist()}
    value = {sid: r["scores"]["difficulty"]["value"] for sid, r in out.items()}
    reason = {sid: r["decisions"][-1]["reason"] for sid, r in out.items()}
    assert all(value[m["sample_id"]] < config.ifd_max < 1 for m in matched)
    assert all(reason[m["sample_id"]] == "in_band" for m in matched)
    at_one = [m for m in mismatched if value[m["sample_id"]] >= 1]
    assert len(at_one) >= len(mismatched) - 2, sorted(value[m["sample_id"]] for m in mismatched)
    dropped = [m for m in mismatched if reason[m["sample_id"]] == "instruction_unhelpful"]
    assert dropped == [m for m in mismatched if value[m["sample_id"]] >= config.ifd_max]
    assert len(dropped) >= len(at_one) and stats.dropped["instruction_unhelpful"] == len(dropped)
    assert all(
        value[m["sample_id"]] < value[s["sample_id"]] for m, s in zip(matched, mismatched, strict=True)
    )


def test_ifd_absolute_band_on_a_small_batch(tiny_model: Path) -> None:
    rows = [
        _row("write a python function that returns the sum of two numbers", "the quick brown fox"),
        _row("what is the capital of france?", "paris is the capital of france."),
    ]
    student = TransformersEngine(model_id="tiny", model_path=str(tiny_model))
    loose, stats = score_difficulty(
        from_records(rows),
        student,
        None,
        DifficultyConfig(methods={"sft": "ifd"}, ifd_min=0.0, ifd_max=1000.0),
    )
    values = [r["scores"]["difficulty"]["value"] for r in loose.to_pylist()]
    assert stats.ifd_band == (0.0, 1000.0)
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


def test_a_seed_whose_working_does_not_hold_is_dropped_as_reference_wrong() -> None:
    """A seed's reference checks against itself; its working does not: "180 * 40 = 7400" is dropped
    (it was kept, its check a pass), and an answer to it has nothing to be checked against."""
    wrong = "An orchard has 180 rows of 40 trees, so 180 * 40 = 7400 trees.\n#### 7400"
    rows = [
        _answer_row("Orchard?", wrong, wrong),
        _answer_row("Trees?", "180 * 40 = 7200 trees.\n#### 7200", wrong),
    ]
    student = Student(
        model_id="student",
        answers={"Orchard": ["#### 7200", "There are 7200 trees."], "Trees": ["#### 7000", "#### 720"]},
    )
    table, stats = score_difficulty(
        from_records(rows),
        student,
        None,
        DifficultyConfig(k=2, methods={"sft": "pass_rate", "math": "pass_rate"}),
        verifier=AnswerVerifier(MathVerifyPool(workers=0)),
    )
    assert _last(table)[0] == ("drop", "reference_wrong")
    detail = [r["decisions"][-1]["detail"] for r in table.to_pylist()]
    assert "its working: 180 * 40 = 7400 (is 7200)" in detail[0]
    assert _last(table)[1] == ("keep", "unverified") and "reference check abstained" in detail[1]
    assert stats.dropped == {"reference_wrong": 1}
