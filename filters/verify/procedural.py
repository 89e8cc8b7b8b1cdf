"""The procedural verifier: reasoning-gym tasks scored by their own family's scorer.

A procedural row carries its task's generator data in ``reference``: ``family`` (the reasoning-gym
dataset name), ``answer`` (the generator's oracle answer; null for families with many valid
answers, which score from the metadata) and ``metadata`` (reasoning-gym's entry metadata as JSON,
kept intact: the scorers read it).

Extraction rule (:func:`procedural_answer`): the text of the response's last ``<answer>…</answer>``
block, stripped, as reasoning-gym's own ``extract_answer(completion, tag_name="answer")`` reads it
(procedural seeds ask for that format: :data:`ptfactory.generators.procedural.ANSWER_FORMAT`);
without one, an answer the response marks, read by the one extractor (``#### X``, ``\\boxed{X}``,
"the answer is X", or a reply of at most three words), never its last number (a family's answer
need not be a number). A response with neither is ``no_answer``. The family's ``score_answer(answer, entry)`` then scores it, in a worker process
(:mod:`~ptfactory.filters.verify.pool`: a scorer that hangs costs one abstention):

========  ================  ==========================================================================
verdict   reason            when
========  ================  ==========================================================================
pass      correct           the scorer gives exactly 1.0
partial   partial_credit    0 < score < 1 (the default scorer's credit for an answer that contains the
                            oracle, e.g. ``42 apples`` for ``42``): recorded in ``partial``, never a pass
fail      wrong_answer      score 0
no_answer no_answer         nothing the stated rule reads
abstain   unknown_family / scorer_error / scorer_timeout / bad_metadata
========  ================  ==========================================================================

Families left out of seeding (:data:`DENIED`): built from benchmark test items, or whose metadata
does not survive JSON (their scorer could never give a stored row 1.0). Rows of a denied family are
still scored when they arrive (scoring them is harmless); ``ptf seeds procedural`` refuses them.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ptfactory.filters.verify.base import Verdict, Verifier, reference_of
from ptfactory.filters.verify.extract import extract
from ptfactory.filters.verify.grader_notes import grader_note
from ptfactory.filters.verify.pool import Failed, WorkerPool

__all__ = [
    "DENIED",
    "ProceduralVerifier",
    "close_families",
    "family_problem",
    "procedural_answer",
    "procedural_families",
    "score_entry",
    "tag_answer",
]

DENIED: dict[str, str] = {
    "gsm_symbolic": "built from GSM8K test-set templates (GSM-Symbolic): benchmark items",
    "arc_agi": "ARC-AGI-1 tasks, its evaluation set included: benchmark items",
    "aiw": "the 'Alice in Wonderland' benchmark's problems with the numbers redrawn: benchmark items",
    "rearc": "its metadata holds tuples that JSON turns into lists: a stored row can never score 1.0",
    "composite": "a mix of other families, not a family: name the families instead",
}


@functools.cache
def _registry() -> dict[str, Any]:
    from reasoning_gym.factory import DATASETS

    return dict(DATASETS)


def procedural_families() -> list[str]:
    """reasoning-gym's families that may seed a batch (registered, not denied), sorted."""
    return sorted(name for name in _registry() if name not in DENIED)


def close_families(name: str) -> list[str]:
    return difflib.get_close_matches(name, procedural_families(), n=5, cutoff=0.6)


def family_problem(name: str) -> str | None:
    """None if ``name`` may seed a batch, else why not (one sentence)."""
    if name in DENIED:
        return f"procedural family {name!r} is left out: {DENIED[name]}"
    if name not in _registry():
        close = close_families(name)
        hint = (
            f"did you mean {', '.join(close)}?" if close else f"available: {', '.join(procedural_families())}"
        )
        return f"unknown procedural family {name!r}; {hint}"
    return None


def tag_answer(text: str) -> str | None:
    """The stated extraction rule: reasoning-gym's ``extract_answer(text, tag_name="answer")``."""
    from reasoning_gym.utils import extract_answer

    answer: str | None = extract_answer(text, tag_name="answer")
    return answer


def procedural_answer(text: str) -> tuple[str, str] | None:
    """(the answer, the rule that read it) by the stated rule (module docstring), or None."""
    tagged = tag_answer(text)
    if tagged is not None:
        return tagged, "answer_tag"
    found = extract(text)
    if found is not None and found.rule not in ("last_number", "word_number"):
        return found.answer, found.rule
    return None


@functools.cache
def _scorer(family: str) -> Callable[[str | None, dict[str, Any]], float]:
    from reasoning_gym import get_score_answer_fn

    fn: Callable[[str | None, dict[str, Any]], float] = get_score_answer_fn(family)
    return fn


def score_entry(family: str, answer: str, entry: dict[str, Any]) -> float:
    """The family's score for ``answer`` (run in a worker: module-level, importable by name)."""
    return float(_scorer(family)(answer, entry))


def _import_reasoning_gym() -> None:
    """A fresh worker's start-up: reasoning-gym (every family, matplotlib included) imported first."""
    import reasoning_gym  # noqa: F401


class ProceduralVerifier(Verifier):
    """``pool``: where scorers run (one spawned process by default; ``WorkerPool(workers=0)`` scores
    in the calling thread, without a time bound)."""

    kind = "procedural"

    def __init__(self, pool: WorkerPool | None = None, name: str | None = None) -> None:
        super().__init__(name)
        self._owns_pool = pool is None
        self.pool = pool or WorkerPool(warmup=_import_reasoning_gym)

    def applies(self, row: Mapping[str, Any]) -> bool:
        return bool(reference_of(row).get("family"))

    def verify_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(rows)
        asked: list[tuple[int, tuple[str, str, dict[str, Any]], dict[str, Any]]] = []
        for index, row in enumerate(rows):
            if not self.applies(row):
                verdicts[index] = self.not_applicable()
                continue
            reference = reference_of(row)
            family = str(reference["family"])
            evidence: dict[str, Any] = {"family": family, "expected": reference.get("answer")}
            if family not in _registry():
                verdicts[index] = self.abstain("unknown_family", **evidence)
                continue
            try:
                metadata = json.loads(reference.get("metadata") or "{}")
            except ValueError as exc:
                verdicts[index] = self.abstain("bad_metadata", error=str(exc), **evidence)
                continue
            response = self.response(row)
            if not response.strip():
                verdicts[index] = self.abstain("no_response", **evidence)
                continue
            found = procedural_answer(response)
            if (note := grader_note(response)) is not None:  # the grader_note check routes it
                evidence["grader_note"] = note
            if found is None:
                verdicts[index] = self.verdict("no_answer", "no_answer", extracted=None, **evidence)
                continue
            answer, rule = found
            evidence.update(extracted=answer, rule=rule)
            entry = {"question": self.prompt(row), "answer": reference.get("answer"), "metadata": metadata}
            asked.append((index, (family, answer, entry), evidence))
        scores = self.pool.run_many(score_entry, [call for _, call, _ in asked])
        for (index, _, evidence), score in zip(asked, scores, strict=True):
            verdicts[index] = self._decide(score, evidence)
        return [v if v is not None else self.abstain("lost") for v in verdicts]

    def _decide(self, score: float | Failed, evidence: dict[str, Any]) -> Verdict:
        if isinstance(score, Failed):
            reason = "scorer_timeout" if score.timeout else "scorer_error"
            return self.abstain(reason, error=score.error, **evidence)
        evidence["score"] = score
        if score == 1.0:
            return self.verdict("pass", "correct", partial=1.0, **evidence)
        if score <= 0.0:
            return self.verdict("fail", "wrong_answer", partial=0.0, **evidence)
        return self.verdict("partial", "partial_credit", partial=min(score, 1.0), **evidence)

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()
