"""An LLM judge: an engine, a model and a rubric template; JSON out, schema-constrained where the
backend supports it (vLLM guided decoding, OpenAI-compatible ``json_schema``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptfactory.annotators.judges.base import Judge, Vote, prompt_and_response
from ptfactory.engines.base import Engine, SamplingParams
from ptfactory.generators.prompts import Template
from ptfactory.generators.prompts import template as load_template

__all__ = ["VOTE_SCHEMA", "LLMJudge", "parse_vote"]

VOTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
        "verdict": {"type": "string", "enum": ["accept", "reject"]},
        "rationale": {"type": "string", "maxLength": 400},
    },
    "required": ["score", "verdict", "rationale"],
}
TEMPLATES = Path(__file__).parent / "templates"
_OBJECT = re.compile(r"\{.*?\}", re.S)
_MAX_CHARS = 6000  # long responses are cut for the judge's context; the cut is stated in the prompt


def parse_vote(raw: str) -> tuple[float | None, str, str, str | None]:
    """(score, verdict, rationale, failure reason) from a judge's reply."""
    candidates = [raw.strip(), *_OBJECT.findall(raw)]
    for text in candidates:
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        score = data.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float) or not 1 <= score <= 10:
            return None, "unparsed", "", f"score {score!r} is not a number from 1 to 10"
        verdict = str(data.get("verdict", "")).strip().lower()
        if verdict not in ("accept", "reject"):
            verdict = "accept" if score >= 6 else "reject"
        return float(score), verdict, str(data.get("rationale", ""))[:400], None
    return None, "unparsed", "", "no JSON object in the reply"


@dataclass
class LLMJudge(Judge):
    engine: Engine | None = None
    rubric: str = "rubric"
    max_tokens: int = 96
    _template: Template | None = field(default=None, init=False, repr=False)

    @property
    def model(self) -> str:
        assert self.engine is not None
        return self.engine.model_id

    def _prompt(self, row: dict[str, Any]) -> str:
        if self._template is None:
            self._template = load_template(self.rubric, TEMPLATES)
        instruction, response = prompt_and_response(row)
        if len(response) > _MAX_CHARS:
            response = response[:_MAX_CHARS] + "\n[... cut for length]"
        return self._template.render(instruction=instruction, response=response)

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        assert self.engine is not None
        params = SamplingParams(
            n=1,
            temperature=0.0,
            max_tokens=self.max_tokens,
            seed=0,
            json_schema=VOTE_SCHEMA if self.engine.supports_json_schema else None,
        )
        replies = self.engine.chat([[{"role": "user", "content": self._prompt(r)}] for r in rows], params)
        votes = []
        for (reply,) in replies:
            self.stats.prompt_tokens += reply.prompt_tokens
            self.stats.completion_tokens += reply.completion_tokens
            score, verdict, rationale, failure = parse_vote(reply.text)
            if reply.failed:  # the request failed after its retries: recorded, not fatal
                failure = reply.finish_reason
            if failure:
                votes.append(
                    Vote(self.name, self.model, None, "unparsed", failure, reply.text[:2000], parsed=False)
                )
            else:
                votes.append(Vote(self.name, self.model, score, verdict, rationale, reply.text[:2000]))
        return votes
