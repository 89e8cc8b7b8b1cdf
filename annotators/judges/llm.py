"""An LLM judge: an engine, a model and a rubric; every vote counts or says why it does not.

Two ways to read a score, chosen per judge (``scoring``):

- ``probability`` (G-Eval-style, the default on engines without constrained decoding, and the
  only way for a base model): the rubric ends where the score goes; the engine returns the
  log-probabilities of the score tokens ``1``..``9`` (one prefill, no decoding). The vote is the
  expected score, mapped onto 1-10, and its confidence is one minus the normalised entropy of
  the distribution. It cannot be cut by ``max_tokens`` and always yields a number.
- ``json``: a schema-constrained JSON reply (vLLM guided decoding, OpenAI-compatible
  ``json_schema``). A reply cut by ``max_tokens`` is retried once with twice the room, then
  scored from probabilities where the engine can score; what still yields nothing is
  ``unparsed`` with its raw text, never a default score.

- ``likelihood``: no rubric at all; the log-probabilities the model gives the response's own
  tokens after the prompt (one prefill), summarised as Min-K% Prob and mapped onto 1-10
  (``annotators/judges/likelihood.py``). It needs no instruction following, so it is what tiny
  and base models judge best with; every vote counts (a response with no tokens is unparsed).
- ``pmi``: the same prefill, and a second one of the response after the same frame with an empty
  instruction; the statistic is the mean gain per token the instruction brings (pointwise mutual
  information), so the text's own fluency, which favours the generator's answers, cancels out.
  Lines the response copies from the instruction (a restated signature or docstring) are left out
  of both passes: a copy is all gain and no answer.

``prompt: completion`` renders a few-shot text prompt instead of a chat turn, for base models
that have no chat template (Gemma 3 270M).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptfactory.annotators.judges.base import Judge, Vote, prompt_and_response
from ptfactory.annotators.judges.likelihood import (
    COPY_SHARE,
    DEFAULT_MAPPING,
    LIKELIHOOD_METHODS,
    MIN_K,
    gain_mean,
    likelihood_score,
    min_k_mean,
    novel_lines,
)
from ptfactory.engines.base import Engine, Prompt, SamplingParams
from ptfactory.errors import EngineError
from ptfactory.generators.prompts import Template
from ptfactory.generators.prompts import template as load_template

__all__ = ["SCORE_TOKENS", "VOTE_SCHEMA", "LLMJudge", "parse_vote", "probability_vote"]

VOTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
        "verdict": {"type": "string", "enum": ["accept", "reject"]},
        "rationale": {"type": "string", "maxLength": 400},
    },
    "required": ["score", "verdict", "rationale"],
}
SCORE_TOKENS = tuple(str(d) for d in range(1, 10))  # one token each in the bundled tokenizers
TEMPLATES = Path(__file__).parent / "templates"
_OBJECT = re.compile(r"\{[^{}]*\}", re.S)
_MAX_CHARS = 6000  # long responses are cut for the judge's context; the cut is stated in the prompt
_MIN_MASS = 1e-4  # below this share on the score tokens the model is not answering the rubric
ACCEPT_AT = 6.0  # a vote's own verdict when the reply gives none
_LIKELIHOOD_FORM = "chat: [user: instruction] -> response | completion: 'Question: {i}\\nAnswer:' -> ' {r}'"
_EMPTY_FORM = "the same frame with an empty instruction"  # pmi's second pass


def parse_vote(raw: str) -> tuple[float | None, str, str, str | None]:
    """(score, verdict, rationale, failure reason) from a JSON reply: the first object with a
    usable score wins (``"8"`` is read as 8); objects without one are skipped, not fatal."""
    failure = "no JSON object in the reply"
    for text in [raw.strip(), *_OBJECT.findall(raw)]:
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        score = data.get("score")
        if isinstance(score, str):
            try:
                score = float(score.strip())
            except ValueError:
                pass
        if isinstance(score, bool) or not isinstance(score, int | float) or not 1 <= score <= 10:
            failure = f"score {data.get('score')!r} is not a number from 1 to 10"
            continue
        verdict = str(data.get("verdict", "")).strip().lower()
        if verdict not in ("accept", "reject"):
            verdict = "accept" if score >= ACCEPT_AT else "reject"
        return float(score), verdict, str(data.get("rationale", ""))[:400], None
    return None, "unparsed", "", failure


def probability_vote(logprobs: list[float]) -> tuple[float | None, float, float]:
    """(score on 1-10, confidence 0-1, probability mass on the score tokens) from the
    log-probabilities of ``SCORE_TOKENS``; score None when the model puts (almost) nothing there."""
    finite = [lp for lp in logprobs if math.isfinite(lp)]
    if not finite:
        return None, 0.0, 0.0
    top = max(finite)
    weights = [math.exp(lp - top) if math.isfinite(lp) else 0.0 for lp in logprobs]
    mass = sum(math.exp(lp) for lp in finite)
    total = sum(weights)
    probs = [w / total for w in weights]
    expected = sum(p * (i + 1) for i, p in enumerate(probs))  # 1..9
    entropy = -sum(p * math.log(p) for p in probs if p > 0)
    confidence = 1.0 - entropy / math.log(len(probs))
    if mass < _MIN_MASS:
        return None, confidence, mass
    return 1.0 + (expected - 1.0) * 9.0 / 8.0, confidence, mass


_SERVED = ("vllm", "openai")  # backends whose constrained decoding is the server's, batched


@dataclass
class LLMJudge(Judge):
    engine: Engine | None = None
    rubric: str = "rubric"
    max_tokens: int = 96
    scoring: str = "auto"  # auto | probability | json | likelihood | pmi
    prompt_style: str = "chat"  # chat | completion
    # the statistic of a borderline answer (score 5.5) and the logistic's scale; None: the
    # scoring's default (DEFAULT_MAPPING)
    likelihood_center: float | None = None
    likelihood_scale: float | None = None
    reads: tuple[str, ...] | None = ("sample_id", "kind", "messages", "provenance")
    _templates: dict[str, Template] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        centre, scale = DEFAULT_MAPPING.get(self.scoring, DEFAULT_MAPPING["likelihood"])
        self.likelihood_center = centre if self.likelihood_center is None else self.likelihood_center
        self.likelihood_scale = scale if self.likelihood_scale is None else self.likelihood_scale

    @property
    def model(self) -> str:
        assert self.engine is not None
        return self.engine.model_id

    @property
    def method(self) -> str:
        """The scoring this judge uses: ``auto`` resolves to json where a server constrains it (vLLM,
        OpenAI), else probability: on an embedded engine prefill alone is much cheaper than decoding
        a constrained reply, though the transformers engine can constrain one too."""
        if self.scoring != "auto":
            return self.scoring
        assert self.engine is not None
        served = self.engine.supports_json_schema and self.engine.backend in _SERVED
        return "json" if served and self.prompt_style == "chat" else "probability"

    def _template_names(self) -> list[str]:
        """The templates its votes are read through (their hashes are part of its identity)."""
        if self.method in LIKELIHOOD_METHODS:
            return []
        if self.method == "json":
            return [self.rubric]
        return [f"{self.rubric}_fewshot" if self.prompt_style == "completion" else f"{self.rubric}_score"]

    def identity(self) -> dict[str, Any]:
        """The model and its revision, the engine's identity (backend, library version, weights
        fingerprint, compute type, device), the scoring method, the prompt (templates' hashes, or the
        likelihood prompt's form and statistic) and the knobs that change a vote's number (not the
        likelihood centre: calibration moves that one)."""
        assert self.engine is not None
        prompt: dict[str, Any] = {"style": self.prompt_style}
        for name in self._template_names():
            if name not in self._templates:
                self._templates[name] = load_template(name, TEMPLATES)
            prompt[name] = self._templates[name].hash
        if self.method == "likelihood":
            prompt.update(form=_LIKELIHOOD_FORM, min_k=MIN_K, scale=self.likelihood_scale)
        elif self.method == "pmi":
            prompt.update(
                form=_LIKELIHOOD_FORM,
                unconditioned=_EMPTY_FORM,
                copied_lines=f"left out (3-gram share >= {COPY_SHARE})",
                scale=self.likelihood_scale,
            )
        elif self.method == "json":
            prompt["max_tokens"] = self.max_tokens
        return {
            "name": self.name,
            "type": "llm",
            "model": self.model,
            "family": self.family,
            "method": self.method,
            "engine": self.engine.identity(),
            "prompt": prompt,
        }

    def _render(self, name: str, row: dict[str, Any]) -> str:
        if name not in self._templates:
            self._templates[name] = load_template(name, TEMPLATES)
        instruction, response = prompt_and_response(row)
        if len(response) > _MAX_CHARS:
            response = response[:_MAX_CHARS] + "\n[... cut for length]"
        return self._templates[name].render(instruction=instruction, response=response)

    def _score_prompt(self, row: dict[str, Any]) -> Prompt:
        if self.prompt_style == "completion":
            # the rating follows "Score: " as in the few-shot examples (render() strips the space)
            return self._render(f"{self.rubric}_fewshot", row) + " "
        return [{"role": "user", "content": self._render(f"{self.rubric}_score", row)}]

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        """An empty reply gets no vote (an abstention, never a score: a likelihood judge would rate
        the lone space a completion prompt leaves as very likely); the others by ``method``."""
        assert self.engine is not None
        empty = [not prompt_and_response(row)[1].strip() for row in rows]
        todo = [row for row, blank in zip(rows, empty, strict=True) if not blank]
        if not todo:
            scored: list[Vote] = []
        elif self.method == "probability":
            scored = self._probability_votes(todo)
        elif self.method in LIKELIHOOD_METHODS:
            scored = self._likelihood_votes(todo)
        else:
            scored = self._json_votes(todo)
        given = iter(scored)
        nothing = "no response to judge"
        return [Vote(self.name, self.model, None, "abstain", nothing, method="abstain") if blank else next(given)
                for blank in empty]  # fmt: skip

    def _likelihood_votes(self, rows: list[dict[str, Any]]) -> list[Vote]:
        assert self.engine is not None
        assert self.likelihood_center is not None and self.likelihood_scale is not None
        votes: list[Vote | None] = [None] * len(rows)
        at: list[int] = []  # the rows the engine scores
        prompts: list[Prompt] = []
        empty: list[Prompt] = []  # pmi: the same frame, no instruction
        responses = []
        for i, row in enumerate(rows):
            instruction, response = prompt_and_response(row)
            response = response[:_MAX_CHARS]
            if self.method == "pmi":
                novel = novel_lines(instruction, response)
                if response.strip() and not novel.strip():  # every line a copy: nothing to score
                    reason = "the response only restates the instruction"
                    votes[i] = Vote(self.name, self.model, 1.0, "reject", reason, "", method=self.method)
                    continue
                response = novel
            at.append(i)
            if self.prompt_style == "completion":
                prompts.append(f"Question: {instruction}\nAnswer:")
                empty.append("Question: \nAnswer:")
                responses.append(" " + response)
            else:
                prompts.append([{"role": "user", "content": instruction}])
                empty.append([{"role": "user", "content": ""}])
                responses.append(response)
        before = self.engine.stats.prompt_tokens
        scored = self.engine.score(prompts, responses) if at else []
        alone = self.engine.score(empty, responses) if at and self.method == "pmi" else scored
        self.stats.prompt_tokens += self.engine.stats.prompt_tokens - before
        for i, tokens, free in zip(at, scored, alone, strict=True):
            if self.method == "pmi":
                statistic = gain_mean(tokens.logprobs, free.logprobs)
                what = "mean log-prob gain from the instruction"
            else:
                statistic = min_k_mean(tokens.logprobs)
                what = "min-20% token log-prob"
            if statistic is None:
                votes[i] = self._unparsed("the response has no tokens", "")
                continue
            score = likelihood_score(statistic, self.likelihood_center, self.likelihood_scale)
            votes[i] = Vote(
                self.name,
                self.model,
                round(score, 4),
                "accept" if score >= ACCEPT_AT else "reject",
                f"{what} {statistic:.3f} over {len(tokens.logprobs)} tokens",
                f"{statistic:.4f}",
                method=self.method,
            )
        done = [v for v in votes if v is not None]
        assert len(done) == len(rows)  # every row scored or restating
        return done

    def _probability_votes(self, rows: list[dict[str, Any]]) -> list[Vote]:
        assert self.engine is not None
        prompts = [self._score_prompt(r) for r in rows]
        before = self.engine.stats.prompt_tokens
        table = self.engine.choice_logprobs(prompts, SCORE_TOKENS)
        self.stats.prompt_tokens += self.engine.stats.prompt_tokens - before
        votes = []
        for logprobs in table:
            score, confidence, mass = probability_vote(logprobs)
            dist = " ".join(f"{d}:{math.exp(lp):.3f}" for d, lp in zip(SCORE_TOKENS, logprobs, strict=True))
            if score is None:
                votes.append(
                    self._unparsed(f"only {mass:.1e} of the probability is on the score tokens", dist)
                )
                continue
            verdict = "accept" if score >= ACCEPT_AT else "reject"
            rationale = f"expected score {score:.2f} (mass {mass:.2f} on 1-9)"
            votes.append(
                Vote(
                    self.name,
                    self.model,
                    round(score, 4),
                    verdict,
                    rationale,
                    dist,
                    method="probability",
                    confidence=round(confidence, 4),
                )
            )
        return votes

    def _json_votes(self, rows: list[dict[str, Any]]) -> list[Vote]:
        assert self.engine is not None
        conversations = [[{"role": "user", "content": self._render(self.rubric, r)}] for r in rows]
        replies = self._ask(conversations, self.max_tokens)
        cut = [i for i, reply in enumerate(replies) if reply.finish_reason == "length"]
        if cut:  # a reply cut by max_tokens: once more with twice the room
            for i, reply in zip(
                cut, self._ask([conversations[i] for i in cut], self.max_tokens * 2), strict=True
            ):
                replies[i] = reply
        votes: list[Vote | None] = []
        failures: dict[int, str] = {}
        for i, reply in enumerate(replies):
            score, verdict, rationale, failure = parse_vote(reply.text)
            if reply.failed:  # the request failed after its retries: recorded, not fatal
                failure = reply.finish_reason
            elif failure and reply.finish_reason == "length":
                failure = f"cut by max_tokens={self.max_tokens * 2} ({failure})"
            if failure:
                failures[i] = failure
                votes.append(None)
            else:
                votes.append(
                    Vote(self.name, self.model, score, verdict, rationale, reply.text[:2000], method="json")
                )
        lost = sorted(failures)
        rescued = self._rescue([rows[i] for i in lost]) if lost else []
        for i, vote in zip(lost, rescued, strict=True):
            votes[i] = vote or self._unparsed(failures[i], replies[i].text[:2000])
        done = [v for v in votes if v is not None]
        assert len(done) == len(rows)  # every row scored or restating
        return done

    def _unparsed(self, why: str, raw: str) -> Vote:
        """A vote that yielded nothing: no score, never a default one; ``why`` and the raw text kept."""
        return Vote(self.name, self.model, None, "unparsed", why, raw, parsed=False, method="unparsed")

    def _ask(self, conversations: list[list[dict[str, str]]], max_tokens: int) -> list[Any]:
        assert self.engine is not None
        params = SamplingParams(
            n=1,
            temperature=0.0,
            max_tokens=max_tokens,
            seed=0,
            json_schema=VOTE_SCHEMA if self.engine.supports_json_schema else None,
        )
        replies = [group[0] for group in self.engine.chat(conversations, params)]
        for reply in replies:
            self.stats.prompt_tokens += reply.prompt_tokens
            self.stats.completion_tokens += reply.completion_tokens
        return replies

    def _rescue(self, rows: list[dict[str, Any]]) -> list[Vote | None]:
        """Votes the JSON path lost, scored from probabilities where the engine can score."""
        try:
            votes = self._probability_votes(rows)
        except (NotImplementedError, EngineError):  # e.g. a server that returns no prompt logprobs
            return [None] * len(rows)
        return [v if v.counts else None for v in votes]
