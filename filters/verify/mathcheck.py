"""Comparing two final answers with math-verify, so that a timeout or an error is an abstention.

math-verify (``parse(gold)``, ``parse(pred)``, ``verify(gold, pred)``: gold first, it is asymmetric)
bounds its own work with ``signal.alarm``, which only works on a process's main thread: off it,
the call raises; with its timeouts off, nothing bounds a pathological comparison
(``10^{10^{10}}``); and by default a timeout or an error returns "not equal" silently. So:

- the comparison runs in worker processes (:class:`MathVerifyPool`, a ``spawn`` pool: safe under
  threads, :mod:`~ptfactory.filters.verify.pool`), where each task runs on the worker's main thread and math-verify's own timeouts work;
  ``raise_on_error=True`` turns its silent timeout into an exception, which the worker reports as
  the status ``timeout`` (any other exception: ``error``);
- the caller waits at most ``hard_timeout_s`` for each answer (a computation stuck in C ignores
  the alarm): past it the pool is terminated and started again, and the comparison is ``timeout``;
- ``workers=0`` compares in the calling thread: fine on a main thread (a script, the CLI); off it,
  math-verify refuses to arm its alarm and the result is ``thread_error``, never a silent "different".

Text answers never reach math-verify: it reads a word as a product of symbols, so "May" equals
"Amy" and "tops" equals "stop". When either answer is text
(:func:`~ptfactory.filters.verify.answer_kinds.is_text`), they compare as text
(:func:`~ptfactory.filters.verify.answer_kinds.text_form`: case, articles and punctuation aside).

The verdicts come from :class:`Comparison.status`: ``equal`` / ``different`` decide, the rest
(``gold_unparsed``, ``timeout``, ``error``, ``thread_error``) abstain.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ptfactory.filters.verify.answer_kinds import is_text, text_form
from ptfactory.filters.verify.pool import Failed, WorkerPool

__all__ = ["DECIDED", "Comparison", "MathVerifyPool", "compare_answers"]

DECIDED = ("equal", "different")
_THREAD_MESSAGE = "threaded environment"  # what math-verify says when its alarm cannot be armed


@dataclass(frozen=True)
class Comparison:
    status: str  # equal | different | gold_unparsed | timeout | error | thread_error
    gold_parsed: str | None = None
    pred_parsed: str | None = None
    error: str | None = None

    @property
    def decided(self) -> bool:
        return self.status in DECIDED


def _boxed(answer: str) -> str:
    # the extractor already took the answer out of its text: box it, so math-verify reads all of it
    # as one expression (what PrimeIntellect's verifiers does)
    return f"\\boxed{{{answer}}}"


def compare_answers(gold: str, pred: str, timeout_s: int = 5) -> Comparison:
    """math-verify's verdict on ``pred`` against ``gold`` (both extracted answers).

    Runs wherever it is called; :class:`MathVerifyPool` calls it on a worker's main thread.
    """
    if is_text(gold) or is_text(pred):  # words are no product of symbols: compared as text
        return Comparison("equal" if text_form(gold) == text_form(pred) else "different", gold, pred)
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        gold_parsed = parse(_boxed(gold), parsing_timeout=timeout_s, raise_on_error=True)
        if not gold_parsed:
            return Comparison("gold_unparsed")
        pred_parsed = parse(_boxed(pred), parsing_timeout=timeout_s, raise_on_error=True)
        shown = (str(gold_parsed[0])[:200], str(pred_parsed[0])[:200] if pred_parsed else None)
        if not pred_parsed:
            # nothing math-verify can read (a word): equal only as the same text
            same = gold.strip().lower() == pred.strip().lower()
            return Comparison("equal" if same else "different", *shown)
        equal = verify(gold_parsed, pred_parsed, timeout_seconds=timeout_s, raise_on_error=True)
        return Comparison("equal" if equal else "different", *shown)
    except TimeoutException as exc:
        return Comparison("timeout", error=f"math-verify timed out after {timeout_s} s: {exc}")
    except Exception as exc:  # any other failure abstains, named
        status = "thread_error" if _THREAD_MESSAGE in str(exc) else "error"
        return Comparison(status, error=f"{type(exc).__name__}: {str(exc)[:300]}")


def _import_math_verify() -> None:
    """A fresh worker's start-up: math-verify and sympy imported before its first task."""
    import math_verify  # noqa: F401


class MathVerifyPool(WorkerPool):
    """Compares answers in worker processes (:class:`~ptfactory.filters.verify.pool.WorkerPool`).

    ``timeout_s`` is math-verify's own bound per parse and comparison (whole seconds: an alarm);
    ``hard_timeout_s`` the longest the caller waits for one answer. ``compare`` is the function the
    workers run (module-level, for pickling; tests pass a slow one).
    """

    def __init__(
        self,
        workers: int = 1,
        timeout_s: int = 5,
        hard_timeout_s: float = 30.0,
        compare: Callable[[str, str, int], Comparison] = compare_answers,
    ) -> None:
        super().__init__(workers, hard_timeout_s, warmup=_import_math_verify)
        self.timeout_s = max(1, int(timeout_s))
        self.compare_fn = compare

    def compare(self, gold: str, pred: str) -> Comparison:
        return self.compare_many([(gold, pred)])[0]

    def compare_many(self, pairs: Sequence[tuple[str, str]]) -> list[Comparison]:
        """One :class:`Comparison` per ``(gold, pred)``, in order."""
        results = self.run_many(self.compare_fn, [(gold, pred, self.timeout_s) for gold, pred in pairs])
        return [
            Comparison("timeout" if r.timeout else "error", error=r.error) if isinstance(r, Failed) else r
            for r in results
        ]
