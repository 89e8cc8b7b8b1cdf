"""The answer verifier: a response's final answer against the row's reference, with math-verify.

Applies to a row with a reference answer (``reference.answer``) that is not a procedural task
(those have their own scorer) and a response to check. The response's answer comes from the one
extractor (:func:`~ptfactory.filters.verify.extract.extract`; its last-number fallback is off for a
response the engine cut at ``max_tokens``: a cut text does not end on its answer); the reference
goes through the same normalisation. math-verify then compares them
(:mod:`~ptfactory.filters.verify.mathcheck`).

=================  ============  ====================================================================
verdict            reason        when
=================  ============  ====================================================================
pass               correct       math-verify says equal
fail               wrong_answer  math-verify says different
fail               wrong_unit    the reply's answer is in another unit of the reference's kind and
                                 differs once converted ("20 seconds" against "20 minutes";
                                 "1,200 seconds" passes: :mod:`~ptfactory.filters.verify.units`)
no_answer          no_answer     the response states no answer (never a default score)
fail               every_answer_wrong  the response states no one answer (two conclusions, a doubted
                                 or a denied one) and none of its numbers is the reference's
                                 (evidence ``stated``): whichever it meant, it is wrong
abstain            no_response   the row has no response to check (an instruction-only row)
abstain            reference_inconsistent  the reference's own working does not hold ("180 * 40 = 7400":
                                 :mod:`~ptfactory.filters.verify.arithmetic`; evidence ``slips``)
abstain            reference_unparsed / math_verify_timeout / math_verify_error / math_verify_thread
=================  ============  ====================================================================

An option letter, yes/no, clock-time or text reference ("B", "C) 12", "yes", "True", "3:30 PM",
"Pacific Ocean") is compared as text, the reply read for that kind
(:mod:`~ptfactory.filters.verify.answer_kinds`; evidence ``answer_kind``): "Yes, because 17 is
prime." passes against "yes", "The answer is (C)" fails against "B", and "The capital of France is
Paris." passes against "Paris" (a text answer never goes through math-verify, which reads "May" as
m*a*y, equal to "Amy"). A reference written as a sentence ("The answer is 18.") is read as a
reply's marked answer is.

Evidence: ``extracted`` (and the ``rule`` that found it), ``expected``, ``reference_source``, and
math-verify's parsed forms (``gold_parsed``, ``pred_parsed``) or its ``error``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ptfactory.filters.verify.answer_kinds import canonical, kind_of, same
from ptfactory.filters.verify.arithmetic import slips
from ptfactory.filters.verify.base import Verdict, Verifier, reference_of
from ptfactory.filters.verify.conclusion import stated_values
from ptfactory.filters.verify.extract import extract, normalize_answer
from ptfactory.filters.verify.grader_notes import grader_note
from ptfactory.filters.verify.markers import after_thinking
from ptfactory.filters.verify.mathcheck import Comparison, MathVerifyPool
from ptfactory.filters.verify.spans import latex_fractions, number_value, plain_numbers
from ptfactory.filters.verify.units import reference_unit, reply_unit

__all__ = ["AnswerVerifier"]

_ABSTAIN = {
    "gold_unparsed": "reference_unparsed",
    "timeout": "math_verify_timeout",
    "error": "math_verify_error",
    "thread_error": "math_verify_thread",
}


def _expected(answer: str) -> str:
    """The reference answer, read as a reply's marked answer is ("The answer is 18." -> "18",
    "#### 18"), else normalised as it is."""
    found = extract(answer, fallback=False)
    return found.answer if found is not None else normalize_answer(answer) or answer


def _slips(reference: Mapping[str, Any]) -> list[str]:
    """The equations of the reference's working that do not hold: recorded when the reference was
    read from a worked solution (``metadata.slips``), or in the answer itself."""
    try:
        recorded = json.loads(reference.get("metadata") or "{}").get("slips") or []
    except (ValueError, AttributeError):
        recorded = []
    return [str(s) for s in recorded] or slips(str(reference["answer"]))


def _percent_agrees(reference: str, response: str, expected: str, answer: str) -> bool:
    """One side a percent, the other the same share as a number: "75%" against 0.75 or 3/4, "0.75"
    against "75%" (the extractor drops the sign; math-verify then reads 75 against 0.75)."""
    got, want = number_value(answer), number_value(expected)
    if got is None or want is None or got == want:
        return False
    written = re.escape(answer)
    if re.search(rf"(?<![\d.]){written}\s*(?:\\?%|percent\b)", after_thinking(response)):
        return got / 100 == want
    return bool(re.search(r"\d\s*(?:\\?%|percent\b)", reference)) and want / 100 == got


def _all_wrong(reference: str, response: str, expected: str, cut: bool) -> list[str]:
    """The numbers of a reply without one answer when none of them is the reference's, as a
    percent or not (else []): a reply that offers 16 or 20, or concludes on 16 and then on 20, is
    wrong against 18 whichever it meant, and goes to no review. Not for a reply cut at
    ``max_tokens`` (it never reached its answer) nor against a reference with a unit (the reply
    may state it in another: "2 h 25 min" for 145 minutes)."""
    want = number_value(expected)
    # every number the reply states, in any of its forms ("\\frac{7}{8}" is 7/8 here)
    text = latex_fractions(plain_numbers(after_thinking(response)))
    values = stated_values(text)
    if cut or want is None or not values or reference_unit(reference) is not None:
        return []
    if any(want in (got, got * 100, got / 100) for got in values):
        return []
    return sorted({str(v) for v in values}, key=lambda v: text.find(v.split("/")[0]))[:12]


def truncated(row: Mapping[str, Any]) -> bool:
    """The engine cut the response at ``max_tokens`` (``provenance.finish_reason == "length"``)."""
    return ((row.get("provenance") or {}).get("finish_reason")) == "length"


def _units(reference: str, response: str, answer: str, evidence: dict[str, Any]) -> bool | None:
    """Where the reference names a unit of a known kind and the reply writes its answer in another
    unit of that kind ("20 seconds" against "20 minutes"): the units in the evidence, and whether
    the converted value equals the reference's (None: no other unit)."""
    value = number_value(answer)
    expected = reference_unit(reference)
    if value is None or expected is None:
        return None
    got = reply_unit(after_thinking(response), value, expected[1][0])
    if got is None or got[1][1] == expected[1][1]:
        return None
    evidence.update(unit=got[1][1], expected_unit=expected[1][1])
    return value * got[1][2] / expected[1][2] == expected[0]


class AnswerVerifier(Verifier):
    """``pool``: the math-verify workers (one spawned process by default, started on first use;
    share one pool between verifiers, or pass ``MathVerifyPool(workers=0)`` on a main thread)."""

    kind = "answer"

    def __init__(self, pool: MathVerifyPool | None = None, name: str | None = None) -> None:
        super().__init__(name)
        self._owns_pool = pool is None
        self.pool = pool or MathVerifyPool()

    def applies(self, row: Mapping[str, Any]) -> bool:
        reference = reference_of(row)
        return bool(reference.get("answer")) and not reference.get("family")

    def verify_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(rows)
        asked: list[tuple[int, str, str, dict[str, Any], bool | None]] = []
        for index, row in enumerate(rows):
            if not self.applies(row):
                verdicts[index] = self.not_applicable()
                continue
            reference = reference_of(row)
            expected = _expected(str(reference["answer"]))
            evidence: dict[str, Any] = {"expected": expected, "reference_source": reference.get("source")}
            response = self.response(row)
            if not response.strip():
                verdicts[index] = self.abstain("no_response", **evidence)
                continue
            if slipped := _slips(reference):  # no verdict against a reference that contradicts itself
                verdicts[index] = self.abstain("reference_inconsistent", slips=slipped, **evidence)
                continue
            found = extract(response, fallback=not truncated(row), like=expected, question=self.prompt(row))
            if (
                note := grader_note(response)
            ) is not None:  # read without it; the grader_note check routes it
                evidence["grader_note"] = note
            if found is None:
                stated = _all_wrong(str(reference["answer"]), response, expected, truncated(row))
                verdicts[index] = (
                    self.verdict("fail", "every_answer_wrong", extracted=None, stated=stated, **evidence)
                    if stated
                    else self.verdict("no_answer", "no_answer", extracted=None, **evidence)
                )
                continue
            evidence.update(extracted=found.answer, rule=found.rule)
            kind = kind_of(expected)
            if kind is not None:  # a letter, yes/no or a time: the same one or not, no math-verify
                evidence.update(answer_kind=kind, expected=canonical(kind, expected))
                agree = same(kind, evidence["expected"], found.answer)
                verdicts[index] = self.verdict(
                    *(("pass", "correct") if agree else ("fail", "wrong_answer")), **evidence
                )
                continue
            if _percent_agrees(str(reference["answer"]), response, expected, found.answer):
                verdicts[index] = self.verdict("pass", "correct", percent=True, **evidence)
                continue
            converted = _units(str(reference["answer"]), response, found.answer, evidence)
            asked.append((index, expected, found.answer, evidence, converted))
        comparisons = self.pool.compare_many([(gold, pred) for _, gold, pred, _, _ in asked])
        for (index, _, _, evidence, converted), comparison in zip(asked, comparisons, strict=True):
            verdicts[index] = self._decide(comparison, evidence, converted)
        return [v if v is not None else self.abstain("lost") for v in verdicts]

    def _decide(
        self, comparison: Comparison, evidence: dict[str, Any], converted: bool | None = None
    ) -> Verdict:
        """math-verify's comparison as a verdict; ``converted``: the reply's answer, in another unit
        of the reference's kind, equals the reference once converted (None: no other unit)."""
        shown: dict[str, Any] = {
            "gold_parsed": comparison.gold_parsed,
            "pred_parsed": comparison.pred_parsed,
            **({"error": comparison.error} if comparison.error else {}),
        }
        if converted is not None and comparison.status in ("equal", "different"):  # another unit
            verdict, reason = ("pass", "correct") if converted else ("fail", "wrong_unit")
            return self.verdict(verdict, reason, **evidence, **shown)
        if comparison.status == "equal":
            return self.verdict("pass", "correct", **evidence, **shown)
        if comparison.status == "different":
            return self.verdict("fail", "wrong_answer", **evidence, **shown)
        return self.abstain(_ABSTAIN.get(comparison.status, "math_verify_error"), **evidence, **shown)

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()
