"""Verifiers: checks that decide whether a response is right, wherever a check exists.

One interface (:class:`Verifier`): ``applies(row) -> bool`` and ``verify(row) -> Verdict`` (or
``verify_many(rows)``, batched), where ``row`` is a sample record as ``table.to_pylist()`` gives it
(schema 3: ``messages``, ``kind``, ``tests``/``entry_point``, ``reference``, ``outcome``, ``steps``,
``provenance``, ``scores``). The response under test is the final assistant turn (a preference
row's ``messages`` stop before its answers: verify ``{**row, "messages": messages + chosen}`` and
the same with ``rejected``). ``verify`` never
raises for what a row holds; a sandbox that cannot work at all raises ``SandboxError``.

A :class:`Verdict`::

    Verdict(verifier="answer", kind="answer", verdict="fail", reason="wrong_answer",
            score=0.0, partial=None,
            evidence={"extracted": "384", "rule": "last_number", "expected": "18", ...})

- ``verdict``: ``pass`` | ``fail`` | ``partial`` | ``no_answer`` | ``abstain``. ``abstain`` has a
  ``reason``: ``not_applicable`` (the row lacks what the check needs: ``applies`` is False),
  ``no_response``, an infrastructure fault (``sandbox_error``), a timeout (``math_verify_timeout``,
  ``scorer_timeout``) or an error: never a silent fail. ``no_answer``: the check applies but the
  response states nothing it can check (never a default score).
- ``score``: 1.0 pass, 0.0 fail / partial / no_answer, None abstain — binary, as a reward should
  be; TRL treats None as "not applicable" (NaN). ``partial``: part credit in [0, 1] (share of
  assertions or constraints held, reasoning-gym's partial score), recorded, never a pass.
- ``final`` (property; stored): True for a fail. A verifier's fail is final: the row is never
  auto-accepted nor the ``chosen`` side of a preference pair; a pass still meets the judges.
- ``evidence``: what a reviewer needs (the extracted and expected answers, assertions passed/total
  and the failed checks, the agent check's output); stored as canonical JSON (``to_record()``).

==================  ==========================================================================
module              holds
==================  ==========================================================================
``base``            :class:`Verdict`, :class:`Verifier`, ``OUTCOMES``
``extract``         the one answer extractor: :func:`extract_answer` / :func:`extract`
``spans``           a stated span as the string to compare (units, amounts, scientific notation)
``markers``         what marks an answer or takes it back: headings, checks, <think>, corrections
``pool``            bounded worker processes (:class:`WorkerPool`): a hung check abstains
``mathcheck``       math-verify's comparison in those workers (:class:`MathVerifyPool`)
``answer``          :class:`AnswerVerifier`: the final answer against ``reference.answer``
``code``            :class:`CodeVerifier`: tests in the sandbox (the execution harness)
``procedural``      :class:`ProceduralVerifier`: reasoning-gym's scorers; the families, the deny-list
``constraints``     :class:`ConstraintsVerifier`: IFEval checks on ``reference.constraints``
``agent``           :class:`AgentVerifier`: the episode's final state re-checked in a fresh sandbox
``grader_notes``    what a reply addresses to its grader; ``notes``: :class:`GraderNoteCheck` (review)
``inputs``          rows from other tables' columns (``ptf judge --reference-column`` ...)
``table``           :func:`verify_table` over an Arrow table, :func:`record_verdicts` into ``scores``
==================  ==========================================================================

Factory and rewards differ in one policy only: an infrastructure fault (the sandbox died) abstains
in the factory (``infra_error="abstain"``, the default: the difficulty stage then asks a control
program whether the sandbox or the solution was at fault) and scores 0 in a reward
(``infra_error="fail"``: a solution that crashes its runner or times out earns nothing). Timeouts
of the solution itself are fails in both.

Usage::

    verifiers = [AnswerVerifier(), CodeVerifier(sandbox), ProceduralVerifier(), ConstraintsVerifier()]
    verdicts = verify_table(table, verifiers)          # per row: [Verdict, ...]
    table = record_verdicts(table, verdicts)           # scores.verifiers
"""

from ptfactory.filters.verify.agent import AgentVerifier
from ptfactory.filters.verify.answer import AnswerVerifier
from ptfactory.filters.verify.base import OUTCOMES, Verdict, Verifier
from ptfactory.filters.verify.code import CodeVerifier
from ptfactory.filters.verify.constraints import ConstraintsVerifier
from ptfactory.filters.verify.extract import extract, extract_answer
from ptfactory.filters.verify.inputs import reference_answer, reference_record, verifier_inputs
from ptfactory.filters.verify.mathcheck import MathVerifyPool
from ptfactory.filters.verify.notes import GraderNoteCheck
from ptfactory.filters.verify.pool import WorkerPool
from ptfactory.filters.verify.procedural import ProceduralVerifier
from ptfactory.filters.verify.table import record_verdicts, verify_rows, verify_table

__all__ = [
    "OUTCOMES",
    "AgentVerifier",
    "AnswerVerifier",
    "CodeVerifier",
    "ConstraintsVerifier",
    "GraderNoteCheck",
    "MathVerifyPool",
    "ProceduralVerifier",
    "Verdict",
    "Verifier",
    "WorkerPool",
    "extract",
    "extract_answer",
    "record_verdicts",
    "reference_answer",
    "reference_record",
    "verifier_inputs",
    "verify_rows",
    "verify_table",
]
