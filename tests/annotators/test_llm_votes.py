"""Every LLM vote counts or says why: probability scoring, cut replies, left-out and constant judges,
the engine's choice log-probabilities, and the two bundled model families."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from ptfactory.annotators.judges import LLMJudge, Panel, Vote
from ptfactory.annotators.judges.base import Judge
from ptfactory.annotators.judges.likelihood import gain_mean, likelihood_score, min_k_mean, novel_lines
from ptfactory.annotators.judges.llm import ACCEPT_AT, SCORE_TOKENS, probability_vote
from ptfactory.engines.base import Completion, Conversation, Engine, Prompt, SamplingParams, TokenLogprobs
from ptfactory.engines.cache import ResponseCache
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.storage.schema import from_records, sample_id


def _rows(n: int, kind: str = "sft") -> list[dict[str, object]]:
    rows = []
    for i in range(n):
        messages = [
            {"role": "user", "content": f"What is {i} plus {i}?"},
            {"role": "assistant", "content": f"{i} plus {i} is {2 * i}."},
        ]
        rows.append(
            {
                "sample_id": sample_id(kind, messages),
                "batch": "b",
                "kind": kind,
                "messages": messages,
                "decisions": [],
            }
        )
    return rows


def test_probability_vote_math() -> None:
    uniform = [math.log(1 / 9)] * 9
    score, confidence, mass = probability_vote(uniform)
    assert (
        score == pytest.approx(5.5)
        and confidence == pytest.approx(0.0, abs=1e-9)
        and mass == pytest.approx(1.0)
    )
    sure_nine = [math.log(1e-6)] * 8 + [math.log(0.99)]
    score, confidence, _ = probability_vote(sure_nine)
    assert score == pytest.approx(10.0, abs=0.01) and confidence > 0.95
    sure_one = [math.log(0.99)] + [math.log(1e-6)] * 8
    assert probability_vote(sure_one)[0] == pytest.approx(1.0, abs=0.01)
    nothing = [math.log(1e-9)] * 9  # the model is not answering with a score
    assert probability_vote(nothing)[0] is None
    assert probability_vote([float("-inf")] * 9)[0] is None


@dataclass
class Scripted(Engine):
    """Replies cut at max_tokens like a real engine: the JSON fits only in ``needs`` tokens."""

    reply: str = '{"score": 8, "verdict": "accept", "rationale": "correct and complete"}'
    needs: int = 40
    can_score: bool = True
    asked: list[int] = field(default_factory=list)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        self.asked.append(params.max_tokens)
        if params.max_tokens >= self.needs:
            return [[Completion(self.reply, 50, self.needs)] for _ in conversations]
        return [
            [Completion(self.reply[: params.max_tokens], 50, params.max_tokens, "length")]
            for _ in conversations
        ]

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        if not self.can_score:
            raise NotImplementedError("no scoring")
        # a peaked distribution on "3"
        return [TokenLogprobs([c], [math.log(0.9 if c == "3" else 0.0125)]) for c in continuations]


def test_a_cut_reply_is_retried_with_more_room() -> None:
    engine = Scripted(model_id="s", needs=40)
    judge = LLMJudge("j", engine=engine, scoring="json", max_tokens=24)
    votes = judge.judge(_rows(2))  # type: ignore[arg-type]
    assert engine.asked == [24, 48]
    assert [(v.score, v.method, v.parsed) for v in votes] == [(8.0, "json", True)] * 2


def test_a_reply_cut_twice_is_scored_from_probabilities() -> None:
    engine = Scripted(model_id="s", needs=1000)
    votes = LLMJudge("j", engine=engine, scoring="json", max_tokens=16).judge(_rows(2))  # type: ignore[arg-type]
    assert all(v.method == "probability" and v.counts for v in votes)
    # expected 3.2 on 1-9, i.e. 3.5 on 1-10
    assert all(v.score is not None and 3.0 < v.score < 4.0 for v in votes)


def test_a_lost_vote_is_unparsed_with_its_raw_text_never_a_default() -> None:
    engine = Scripted(model_id="s", needs=1000, can_score=False)
    judge = LLMJudge("j", engine=engine, scoring="json", max_tokens=16)
    votes = judge.judge(_rows(2))  # type: ignore[arg-type]
    assert all(not v.parsed and v.score is None and v.raw == engine.reply[:32] for v in votes)
    assert all("cut by max_tokens=32" in v.rationale for v in votes)
    assert judge.stats.counted_share == 0.0


@dataclass
class Fixed(Judge):
    scores: list[float | None] = field(default_factory=list)

    @property
    def model(self) -> str:
        return "fixed"

    def _judge(self, rows: list[dict[str, object]]) -> list[Vote]:
        out = []
        for i, _ in enumerate(rows):
            s = self.scores[i % len(self.scores)]
            if s is None:
                out.append(
                    Vote(self.name, "fixed", None, "unparsed", "lost", "?", parsed=False, method="unparsed")
                )
            else:
                out.append(Vote(self.name, "fixed", s, "accept" if s >= 6 else "reject", method="json"))
        return out


@dataclass
class Abstains(Fixed):
    def _judge(self, rows: list[dict[str, object]]) -> list[Vote]:
        return [Vote(self.name, "fixed", None, "abstain", "not mine") for _ in rows]


def test_a_judge_under_the_minimum_is_left_out_and_a_constant_one_is_flagged() -> None:
    good = Fixed("good", scores=[2, 4, 6, 8, 9])
    other = Fixed("other", scores=[3, 5, 6, 7, 9])
    flaky = Fixed("flaky", scores=[1, None, None, 2, 1])  # counts 3 of 5
    constant = Fixed("constant", scores=[5])
    quiet = Abstains("quiet")  # abstaining is not losing votes
    panel = Panel([good, other, flaky, constant, quiet], min_counted_share=0.95)
    table, report = panel.judge_table(from_records(_rows(10)))
    assert report.left_out == ["flaky"]
    assert report.counted_share["flaky"] == pytest.approx(0.6)
    assert report.counted_share["quiet"] is None and report.counted_share["good"] == 1.0
    assert report.constant == ["constant"]
    first = table.to_pylist()[0]["scores"]
    assert first["judge_mean"] == pytest.approx((2 + 3) / 2, abs=1e-3)  # neither flaky nor constant
    assert report.alpha is not None and report.alpha > 0.8  # good and other agree; constant is out


def test_persisted_weights_move_the_mean(tmp_path: Path) -> None:
    """Judges nothing measured average equally; the weights their identities earned (the store's:
    AUC 0.875 and 0.625 on expert labels, weights 0.75 and 0.25) weigh their votes."""
    from ptfactory.annotators.judges import CalibrationStore

    @dataclass
    class Named(Fixed):
        @property
        def model(self) -> str:  # two models: two identities
            return f"fixed-{self.name}"

    judges: list[Judge] = [Named("a", family="fa", scores=[9, 8]), Named("b", family="fb", scores=[1, 2])]
    equal, _ = Panel(judges).judge_table(from_records(_rows(2)))
    store = CalibrationStore.under(tmp_path)
    for judge, value in zip(judges, (0.875, 0.625), strict=True):
        store.put_fit(
            judge.name, judge.identity_key, judge.identity(), {"auc": value, "labels": 40, "cut": 6.0}
        )
    weighted, report = Panel(judges, store=store).judge_table(from_records(_rows(2)))
    assert equal.to_pylist()[0]["scores"]["judge_mean"] == pytest.approx(5.0)
    assert weighted.to_pylist()[0]["scores"]["judge_mean"] == pytest.approx(7.0)
    assert weighted.to_pylist()[0]["scores"]["judge_votes"] == 2
    assert {n: w.weight for n, w in report.weights.items()} == {"a": 0.75, "b": 0.25}


def test_choice_logprobs_one_pass_equals_one_scored_continuation_each(
    tiny_model: Path, tmp_path: Path
) -> None:
    """The batched prefill (left-padded, positions from the mask) must give what scoring each
    choice separately gives, for chat and completion prompts of different lengths; and it is cached."""
    engine = TransformersEngine(
        model_id="tiny", model_path=str(tiny_model), cache=ResponseCache(tmp_path / "c.sqlite"), batch_size=3
    )
    prompts: list[Prompt] = [
        [{"role": "user", "content": "what is the capital of france?"}],
        "the quick brown fox jumps over the lazy dog. score: ",
        [{"role": "user", "content": "write a python function that returns the sum of two numbers please"}],
        "data factory: ",
    ]
    fast = engine.choice_logprobs(prompts, SCORE_TOKENS)
    slow = Engine._choice_logprobs(engine, prompts, SCORE_TOKENS)
    assert np.allclose(fast, slow, atol=1e-4)
    sent = engine.stats.requests_sent
    assert engine.choice_logprobs(prompts, SCORE_TOKENS) == fast and engine.stats.requests_sent == sent


_GOOD_BAD = [
    ("What is 7 times 8?", "7 times 8 is 56.", "Bananas are yellow and grow in bunches."),
    ("Name three primary colors.", "Red, blue and yellow.", "Name three primary colors."),
    ("Translate 'thank you' into French.", "'Thank you' in French is 'merci'.", "The moon orbits the Earth."),
    ("How many legs does a spider have?", "A spider has eight legs.", "Name three primary colors."),
]


# the two bundled families, each judged the way it judges best: through its chat template, or as
# a `Question: ... Answer:` completion (Gemma 3 270M is a base model)
_FAMILIES = pytest.mark.parametrize(
    ("model", "style"),
    [("bundled", "chat"), ("bundled:gemma3-270m", "completion")],
    ids=["smollm2", "gemma3"],
)


def _bundled_judge(model: str, style: str, scoring: str) -> tuple[LLMJudge, list[dict[str, object]]]:
    """An LLM judge on the real bundled ``model`` and the rows of ``_GOOD_BAD``, good then bad."""
    from ptfactory.engines.bundled import bundled_model_dir
    from tests.models import TEST_STATE

    engine = TransformersEngine(model_id=model, model_path=str(bundled_model_dir(TEST_STATE, model=model)))
    judge = LLMJudge(model, engine=engine, scoring=scoring, prompt_style=style)
    rows: list[dict[str, object]] = []
    for prompt, good, bad in _GOOD_BAD:
        for response in (good, bad):
            messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
            rows.append({"sample_id": sample_id("sft", messages), "kind": "sft", "messages": messages})
    return judge, rows


@pytest.mark.slow
@_FAMILIES
def test_both_bundled_families_count_every_vote(model: str, style: str, smollm2: Path) -> None:
    """Probability scoring on the real models: every vote counts, with a confidence, and the scores
    are not constant (the models read the rows)."""
    judge, rows = _bundled_judge(model, style, "probability")
    votes = judge.judge(rows)
    assert judge.stats.counted_share == 1.0
    assert all(
        v.method == "probability" and v.confidence is not None and 0 <= v.confidence <= 1 for v in votes
    )
    scores = [v.score for v in votes if v.score is not None]
    assert max(scores) - min(scores) > 0.05


def test_min_k_mean_and_the_logistic_map() -> None:
    assert min_k_mean([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0, -9.0, -10.0]) == -9.5  # lowest 20%
    assert min_k_mean([-0.5]) == -0.5  # at least one token
    assert min_k_mean([]) is None
    assert likelihood_score(-4.0, -4.0, 1.0) == pytest.approx(5.5)
    assert (
        1.0 <= likelihood_score(-50.0, -4.0, 1.0) < 1.01 and 9.99 < likelihood_score(0.0, -4.0, 0.1) <= 10.0
    )
    assert likelihood_score(-3.0, -4.0, 1.0) > likelihood_score(-5.0, -4.0, 1.0)


@pytest.mark.slow
@_FAMILIES
def test_likelihood_scoring_prefers_the_answer_to_the_question(model: str, style: str, smollm2: Path) -> None:
    """Likelihood votes on the real models: every vote counts, and in each (question, answer,
    unrelated text) pair the answer scores higher, on both families."""
    judge, rows = _bundled_judge(model, style, "likelihood")
    votes = judge.judge(rows)
    assert judge.stats.counted_share == 1.0 and all(v.method == "likelihood" for v in votes)
    scores = [v.score for v in votes]
    wins = sum(scores[i] > scores[i + 1] for i in range(0, len(scores), 2))  # type: ignore[operator]
    assert wins >= len(_GOOD_BAD) - 1, scores


# (question, right answer, the fluent text a chat model produces whatever it is asked)
_GENERIC = [
    ("What is the capital of France?", "Paris.",
     "I'm sorry, but I can't help with that. Is there anything else I can help you with?"),
    ("Write a Python function add(a, b) that returns the sum of a and b.", "def add(a, b):\n    return a + b\n",
     "Sure! Here is a Python function that does what you asked:\n\n```python\ndef function():\n    pass\n```"),
    ("How many legs does a spider have?", "A spider has 8 legs.",
     "That is a great question! Let me think about it step by step."),
]  # fmt: skip


def test_the_gain_statistic_subtracts_the_empty_frame() -> None:
    assert gain_mean([-1.0, -3.0], [-4.0, -4.0]) == pytest.approx(2.0)  # the instruction helps: > 0
    assert gain_mean([-2.0], [-1.0, -1.0, -1.0]) == pytest.approx(-1.0)
    assert gain_mean([], [-1.0]) is None


@pytest.mark.slow
@_FAMILIES
def test_pmi_scoring_ranks_the_answer_over_the_models_own_stock_text(
    model: str, style: str, smollm2: Path
) -> None:
    """pmi votes on the real models: each right answer scores above the stock reply a chat model
    gives to anything, on both families, with the statistic recorded in ``raw``. Likelihood on
    the generator's own weights ranks the refusal above "Paris.": the text is the model's most
    probable, which is why the bundled judges score by the gain."""
    judge, rows = _bundled_judge(model, style, "pmi")
    assert judge.likelihood_center == 0.75 and judge.identity()["method"] == "pmi"
    rows = []
    for prompt, good, bad in _GENERIC:
        for response in (good, bad):
            messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
            rows.append({"sample_id": sample_id("sft", messages), "kind": "sft", "messages": messages})
    votes = judge.judge(rows)
    assert judge.stats.counted_share == 1.0 and all(v.method == "pmi" for v in votes)
    scores = [v.score for v in votes]
    assert all(scores[i] > scores[i + 1] for i in range(0, len(scores), 2)), scores  # type: ignore[operator]
    assert all(float(v.raw or "nan") > 0 for v in votes[::2])  # the instruction raised the answers
    if model == "bundled":
        likely = LLMJudge(model, engine=judge.engine, scoring="likelihood", prompt_style=style).judge(
            rows[:2]
        )
        assert likely[0].score is not None and likely[1].score is not None
        assert likely[0].score < likely[1].score


@dataclass
class Recording(Engine):
    """Scores each continuation token -1 after a question and -3 after the empty frame, and keeps
    what it was asked to score."""

    scored: list[str] = field(default_factory=list)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        raise NotImplementedError

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        self.scored.extend(continuations)
        empty = [not (p if isinstance(p, str) else p[-1]["content"]).strip() for p in prompts]
        return [TokenLogprobs([c], [-3.0 if e else -1.0]) for c, e in zip(continuations, empty, strict=True)]


def test_pmi_leaves_out_the_lines_copied_from_the_instruction() -> None:
    """A restated signature and docstring are all gain and no answer: pmi scores only the lines the
    response adds, and a response that only restates the instruction is a counted reject."""
    task = 'def double(x: int) -> int:\n    """Return twice x."""\n'
    answer = '```python\ndef double(x: int) -> int:\n    """Return twice x."""\n    return 2 * x\n```\n'
    assert novel_lines(task, answer) == "```python\n    return 2 * x\n```\n"
    assert novel_lines("Add 2 and 3.", "\n5\n") == "\n5\n"  # blank lines are not copies
    # a docstring re-wrapped onto one line, a word changed, is still a copy; the answer is not
    wrapped = 'def f(s):\n    """Return True if every bracket in s is closed in the\n    right order."""\n'
    reply = 'def f(s):\n    """Return True if every bracket in s is closed in the right order!"""\n    return s == ""\n'
    assert novel_lines(wrapped, reply) == '    return s == ""\n'
    assert novel_lines(wrapped, "This closes every bracket in the right way.\n") != ""
    rows = []
    for response in (answer, task):
        messages = [{"role": "user", "content": task}, {"role": "assistant", "content": response}]
        rows.append({"sample_id": sample_id("sft", messages), "kind": "sft", "messages": messages})
    engine = Recording(model_id="r")
    votes = LLMJudge("j", engine=engine, scoring="pmi").judge(rows)  # type: ignore[arg-type]
    assert "def double" not in engine.scored[0] and "return 2 * x" in engine.scored[0]
    assert len(engine.scored) == 2  # the answer in both frames; the restatement is not scored
    assert votes[0].score is not None and votes[0].score > ACCEPT_AT and votes[0].raw == "2.0000"
    assert (votes[1].score, votes[1].verdict, votes[1].counts) == (1.0, "reject", True)
    assert "restates" in votes[1].rationale
