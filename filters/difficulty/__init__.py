"""Difficulty: keep the samples the model currently struggles with, and nothing it must not learn.

First, for every live row: a response the engine cut at ``max_tokens`` (``provenance.finish_reason
== "length"``) is dropped as ``truncated``: never trained on, whatever it scores. Then, per kind
(``DifficultyConfig.methods``; docs/difficulty.md for the measurements behind the defaults):

- ``pass_rate`` on code rows: a student model answers ``k`` times; the answers run in the sandbox
  against the tests (:mod:`ptfactory.filters.execution.attempts`); difficulty = 1 - pass rate over
  the attempts that count. An attempt the infrastructure failed abstains (a known-good control
  program failed the same way in the same sandbox, on every try; or the engine failed the
  request); a fault the solution causes (it kills its runner, sleeps past the limit, floods its
  output, runs out of memory) is its failure. By what the execution stage recorded:

  =====================  ===========================  =====================================
  row's own solution     student                      decision
  =====================  ===========================  =====================================
  passed                 solved more than max share   drop ``too_easy`` (default: k of k)
  passed                 every attempt graded, none   keep ``hard``
                         solved (a clean failure)
  passed                 in between, or none solved   keep ``in_band``
                         with some abstained
  passed                 every attempt abstained      keep ``not_scored``
  failed / timeout...    nothing passes (nor another  drop ``unsolvable``
                         candidate for the prompt)
  failed / timeout...    something passes             drop ``execution_<status>``: a wrong
                                                      answer to a solvable problem
  sandbox_error          -                            drop ``execution_sandbox_error``: an
                                                      infrastructure fault, unverified
  =====================  ===========================  =====================================

  Failing code rows are dropped here, not at execution, so that this decision can tell the two
  failures apart; they stay in the table for the execution judge and preference pairs. Their
  ``scores.difficulty.detail`` is JSON: ``{solved, k, abstained, passing, failing}`` with one
  passing and one failing student attempt, for pass-over-fail pairs.
- ``pass_rate`` on rows with a final answer (``math``: SFT rows whose ``reference`` carries one;
  or any row of a kind set to ``pass_rate`` whose response states one): the student answers ``k``
  times and the answer verifier (the one extractor, math-verify) compares each answer with the
  row's; math-verify timeouts and errors abstain. The row's own answer is checked against its
  reference (:mod:`~ptfactory.filters.difficulty.answers`):

  =========================  ======================  ===================================
  row's answer vs reference  student                 decision
  =========================  ======================  ===================================
  fail / no_answer           -                       drop ``reference_wrong``
  -                          every attempt abstained keep ``not_scored``
  -                          solved more than share  drop ``too_easy``
  -                          solved some             keep ``in_band``
  no reference / abstained   solved none             keep ``unverified``
  pass                       solved none, some       keep ``in_band``
                             abstained
  pass                       every attempt graded,   keep ``hard``
                             none solved
  =========================  ======================  ===================================
- ``ifd``: Instruction-Following Difficulty (:mod:`~ptfactory.filters.difficulty.ifd`; both
  passes in the same chat frame) against the absolute band: below ``ifd_min`` ``too_easy``, at
  or above ``ifd_max`` ``instruction_unhelpful``, else ``in_band``.
- ``none``: kept as ``not_scored``. Agent rows keep the ``solve_rate`` difficulty their rollouts set.
"""

from ptfactory.filters.difficulty.config import DifficultyConfig
from ptfactory.filters.difficulty.ifd import IFDScore, ifd_scores
from ptfactory.filters.difficulty.score import STAGE, DifficultyStats, score_difficulty

__all__ = ["STAGE", "DifficultyConfig", "DifficultyStats", "IFDScore", "ifd_scores", "score_difficulty"]
