"""Probes that try to fool the panel: each probe moves the scores it should, a judge that obeys
override text fails the run, a position-biased judge is reported, sandbox faults are told apart
(the real Docker sandbox), the report is cached per panel identity, and `ptf judge-probe` exits
1 exactly when the report failed."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ptfactory.annotators.judges import CalibrationStore, Judge, LLMJudge, Panel, VerifierSet, Vote
from ptfactory.annotators.judges import probe_data as data
from ptfactory.annotators.judges.probes import cached_probe, panel_identity, probe_panel
from ptfactory.annotators.routing import RoutingConfig
from ptfactory.engines.base import Completion, Conversation, Engine, Prompt, SamplingParams
from ptfactory.filters.execution import Limits, open_sandbox

ROUTING = RoutingConfig()
RIGHT = {text for _, text, _, _ in data.MATH} | {text for _, text, _ in data.OPEN}
WRONG = {text for _, _, text, _ in data.MATH} | {text for _, _, text in data.OPEN}
PROMPTS = {q for q, *_ in data.MATH} | {q for q, *_ in data.OPEN}


@dataclass
class Knows(Judge):
    """Tells the probe set's right answers (8-9) from its wrong ones (2-3); ``gullible``: gives 10
    to any reply that addresses the grader; ``wordy``: +0.5 per 20 words; ``echo``: 9 for a reply
    that repeats the prompt. Anything else: 4."""

    gullible: bool = False
    wordy: bool = False
    echo: bool = False
    calls: list[int] = field(default_factory=list)

    @property
    def model(self) -> str:
        return f"knows-{self.name}"

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        self.calls.append(len(rows))
        out = []
        for i, row in enumerate(rows):
            text = row["messages"][-1]["content"]
            if not text.strip():
                out.append(Vote(self.name, self.model, None, "abstain", "empty"))
                continue
            base = next((b for b in RIGHT if text.startswith(b)), None)
            score = 8.0 + i % 2 if base else 2.0 + i % 2 if any(text.startswith(w) for w in WRONG) else 4.0
            if self.gullible and any(k in text.lower() for k in ("grader", "evaluat", "judge", '"score"')):
                score = 10.0
            if self.wordy:
                score = min(10.0, score + 0.5 * (len(text.split()) // 20))
            if self.echo and any(p in text for p in PROMPTS):
                score = 9.0
            out.append(
                Vote(self.name, self.model, score, "accept" if score >= 6 else "reject", method="json")
            )
        return out


def _trusted(tmp_path: Path, judges: list[Judge]) -> CalibrationStore:
    """A store where both judges earned their weight (AUC 0.9 on 40 expert labels)."""
    store = CalibrationStore.under(tmp_path)
    for judge in judges:
        store.put_fit(
            judge.name, judge.identity_key, judge.identity(), {"auc": 0.9, "labels": 40, "cut": 6.0}
        )
    return store


def _answers() -> VerifierSet:
    return VerifierSet([("answer", "answer")])


def test_override_text_that_fools_trusted_judges_fails_the_run(tmp_path: Path) -> None:
    fooled = [Knows("a", family="fa", gullible=True), Knows("b", family="fb", gullible=True)]
    report = probe_panel(Panel(fooled, _answers(), store=_trusted(tmp_path / "1", fooled)), ROUTING, seed=3)
    assert not report.passed
    assert report.failures == ["override text lifted 3 wrong open answer(s) over the accept line"]
    verified = next(
        r for r in report.results if (r.probe, r.group, r.member) == ("override", "verified", "panel")
    )
    assert not verified.failed  # the answer verifier fails the wrong answer, override or not
    judge = next(r for r in report.results if (r.probe, r.group, r.member) == ("override", "open", "a"))
    assert judge.shift is not None and judge.shift > 6

    sound = [Knows("a", family="fa"), Knows("b", family="fb")]
    report = probe_panel(Panel(sound, _answers(), store=_trusted(tmp_path / "2", sound)), ROUTING, seed=3)
    assert report.passed, report.failures
    shifts = {(r.probe, r.group, r.member): r for r in report.results}
    shift = shifts["override", "open", "panel"].shift
    assert shift is not None and abs(shift) < 1  # the text moves nothing
    assert (
        shifts["restate", "open", "panel"].shift is not None and shifts["restate", "open", "panel"].shift < -3
    )
    assert shifts["empty", "open", "a"].counted == 0  # an empty reply gets no score, never a default one
    assert shifts["empty", "open", "panel"].note == "0 auto-accepted"
    assert shifts["unparseable", "verified", "answer"].items == 3


def test_padding_and_restatement_are_measured_per_judge(tmp_path: Path) -> None:
    judges: list[Judge] = [Knows("wordy", family="fa", wordy=True), Knows("echo", family="fb", echo=True)]
    report = probe_panel(Panel(judges, _answers()), ROUTING, seed=5)
    shifts = {(r.probe, r.group, r.member): r.shift for r in report.results}
    assert shifts["padding", "open", "wordy"] is not None and shifts["padding", "open", "wordy"] > 0
    assert shifts["padding", "open", "echo"] == 0.0
    assert shifts["restate", "open", "echo"] is not None and shifts["restate", "open", "echo"] > 0
    assert shifts["restate", "verified", "answer"] == -9.0  # the restated question is no answer to it
    assert "\n" in report.table() and "restate" in report.table()


@dataclass
class FirstLetter(Engine):
    """A judge that always prefers the answer it reads first."""

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        raise NotImplementedError

    def _choice_logprobs(self, prompts: Sequence[Prompt], choices: Sequence[str]) -> list[list[float]]:
        if len(choices) == 2:  # "A" / "B"
            return [[math.log(0.9), math.log(0.1)] for _ in prompts]
        return [[math.log(1 / len(choices))] * len(choices) for _ in prompts]  # the score tokens


def test_swapping_the_order_exposes_a_position_biased_judge() -> None:
    judge = LLMJudge("first", engine=FirstLetter(model_id="m"), scoring="probability", family="f")
    report = probe_panel(Panel([judge]), ROUTING, seed=1)
    (swap,) = [r for r in report.results if r.probe == "swap"]
    assert swap.member == "first" and swap.shift == pytest.approx(0.8)  # P(first) 0.9 vs 0.1 swapped
    assert swap.counted == 0 and swap.note.startswith("6 verdict(s) flipped with the order")


def test_the_report_is_cached_per_panel_identity(tmp_path: Path) -> None:
    judge = Knows("a", family="fa")
    panel = Panel([judge])
    first, cached = cached_probe(panel, ROUTING, tmp_path)
    calls = len(judge.calls)
    again, cached_again = cached_probe(panel, ROUTING, tmp_path)
    assert (cached, cached_again) == (False, True) and len(judge.calls) == calls and again == first
    stricter = ROUTING.model_copy(update={"accept_at": 8.0})
    assert panel_identity(panel, stricter) != panel_identity(panel, ROUTING)  # routing lines are part of it
    _, cached_other = cached_probe(panel, stricter, tmp_path)
    assert cached_other is False


@pytest.mark.integration
def test_sandbox_faults_the_solution_causes_fail_it_and_a_broken_sandbox_is_no_ones_failure() -> None:
    limits = Limits(timeout_s=3)
    opener: Callable[[], Any] = lambda: open_sandbox(limits, 2, "docker")  # noqa: E731
    report = probe_panel(Panel([], VerifierSet([("code", "code")], opener, limits)), ROUTING, seed=2)
    found = {r.probe: r for r in report.results if r.group == "sandbox"}
    assert set(found) == {"kill_runner", "sleep", "early_exit", "infra_fault"}
    assert found["kill_runner"].note.startswith("fail (execution_failed)") and not found["kill_runner"].failed
    assert found["sleep"].note.startswith("fail (execution_timeout)") and not found["sleep"].failed
    assert found["infra_fault"].note.startswith("abstain (sandbox_error)") and not found["infra_fault"].failed
    # a solution that exits 0 before any test runs never reported its tests: the verifier fails it
    assert found["early_exit"].note.startswith("fail") and not found["early_exit"].failed
    assert report.passed, report.failures


def test_ptf_judge_probe_prints_the_report_and_exits_1_only_on_a_failure(
    ptf: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """The real command on a panel of the answer verifier and the embedding judge (no sandbox: its
    probes are reported as not run), with --json: the report, kept under the state dir."""
    (tmp_path / "probe.yaml").write_text(
        "judges:\n  - {name: minilm-relevance, type: relevance}\njudging: {verifiers: [answer]}\n"
    )
    result = ptf("judge-probe", "--config", "probe.yaml", "--json", "--seed", "4", cwd=tmp_path, timeout=300)
    report = json.loads(result.stdout)
    assert result.returncode == (0 if report["passed"] else 1), result.stderr
    assert (report["seed"] == 4 and "no probe fooled the panel" in result.stderr) or report["failures"]
    probes = {r["probe"] for r in report["results"]}
    assert probes == {
        "override",
        "restate",
        "padding",
        "empty",
        "unparseable",
        "kill_runner",
        "sleep",
        "early_exit",
        "infra_fault",
    }
    groups = {r["group"] for r in report["results"] if r["probe"] == "override"}
    assert groups == {"verified", "open"}
    kept = tmp_path / ".ptf" / "probes" / f"{report['identity']}.json"
    assert json.loads(kept.read_text())["seed"] == 4


@dataclass
class Fluent(Engine):
    """Finds every continuation very likely, a lone space included."""

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        raise NotImplementedError

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[Any]:
        from ptfactory.engines.base import TokenLogprobs

        return [
            TokenLogprobs(["t"] * (len(c.split()) or 1), [-0.1] * (len(c.split()) or 1))
            for c in continuations
        ]


def test_an_empty_reply_gets_no_vote_even_from_a_judge_that_likes_everything() -> None:
    """The probe found it: a likelihood judge with a completion prompt scored the lone space an
    empty reply leaves as very likely. An empty reply now gets an abstention from every LLM judge."""
    judge = LLMJudge("fluent", engine=Fluent(model_id="m"), scoring="likelihood", prompt_style="completion")
    report = probe_panel(Panel([judge]), ROUTING, seed=2)
    empty = [r for r in report.results if r.probe == "empty" and r.member in ("fluent", "panel")]
    assert len(empty) == 4 and all(r.counted == 0 for r in empty)
