"""The panel's verifiers: first in the panel, built per batch, the sandbox opened only if a row needs it.

The verifiers themselves live in :mod:`ptfactory.filters.verify`; here the panel decides which run
(``judging.verifiers``, and a ``type: execution`` judge, which is the code verifier under that
judge's name), opens the sandbox only for rows the execution stage did not already run (a code row
without ``scores.execution``) or agent episodes to replay, closes every pool and container after
the batch, and turns verdicts into the panel's votes:

=============  =========  ===========================================================
verdict        vote       why
=============  =========  ===========================================================
pass           10         right: the top of the judges' 1-10 scale
fail           1          wrong, and final (routing never accepts it)
partial        none       part credit is no pass (or the generator's samples disagree:
                          annotators/judges/consistency.py); the row goes to review
no_answer      none       nothing to check: never a default score; review
abstain        none       not applicable, an infrastructure fault, a timeout
=============  =========  ===========================================================

A row's **label** (what judges are weighed against): 1 when a verifier passed it and none failed
it, 0 when any failed it, none otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ptfactory.annotators.judges.base import Vote
from ptfactory.annotators.judges.consistency import ConsistencyCheck
from ptfactory.annotators.judges.identity import verifier_key
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.limits import ExecResult, Limits
from ptfactory.filters.verify import (
    AgentVerifier,
    AnswerVerifier,
    CodeVerifier,
    ConstraintsVerifier,
    GraderNoteCheck,
    ProceduralVerifier,
    Verdict,
    Verifier,
    verify_table,
)

__all__ = ["FAIL_SCORE", "KINDS", "PASS_SCORE", "VerifierSet", "labels_of", "verdict_vote"]

KINDS = ("code", "answer", "procedural", "constraints", "agent", "consistency", "grader_note")
PASS_SCORE, FAIL_SCORE = 10.0, 1.0


class _NoSandbox(Sandbox):
    """Where no sandbox is configured: every run is an infrastructure fault (the code verifier
    abstains on it; an agent replay refuses it), never a failure of the code."""

    backend = "none"

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        return ExecResult("sandbox_error", None, 0.0, detail="no sandbox: pass one to run code")


def verdict_vote(verdict: Verdict) -> Vote:
    """A verdict as the panel's vote (the table in the module docstring)."""
    score = {"pass": PASS_SCORE, "fail": FAIL_SCORE}.get(verdict.verdict)
    return Vote(
        verdict.verifier,
        f"verifier:{verdict.kind}",
        score,
        {"pass": "accept", "fail": "reject"}.get(verdict.verdict, "abstain"),
        f"{verdict.verdict}: {verdict.reason}",
        method="verifier",
    )


def _none(name: str, kind: str) -> Vote:
    return Vote(name, f"verifier:{kind}", None, "abstain", "not applicable", method="verifier")


def labels_of(verdicts: Sequence[Sequence[Verdict]]) -> np.ndarray[Any, Any]:
    """Per row: 1 a verifier passed it and none failed it, 0 one failed it, -1 no decision."""
    out = np.full(len(verdicts), -1, dtype=np.int8)
    for i, row in enumerate(verdicts):
        if any(v.verdict == "fail" for v in row):
            out[i] = 0
        elif any(v.verdict == "pass" for v in row):
            out[i] = 1
    return out


@dataclass
class VerifierSet:
    """Which verifiers run, by (name, kind); ``sandbox``: opens the sandbox (None: code the
    execution stage did not run abstains as an infrastructure fault)."""

    members: list[tuple[str, str]] = field(default_factory=lambda: [(k, k) for k in KINDS])
    sandbox: Callable[[], Sandbox] | None = None
    limits: Limits | None = None

    def __post_init__(self) -> None:
        unknown = [kind for _, kind in self.members if kind not in KINDS]
        if unknown:
            raise ValueError(f"unknown verifier {unknown[0]!r}; verifiers: {', '.join(KINDS)}")

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.members]

    def keys(self) -> list[str]:
        return [verifier_key(kind) for _, kind in self.members]

    def kind_of(self, name: str) -> str:
        return dict(self.members)[name]

    def _needs_sandbox(self, rows: list[dict[str, Any]]) -> bool:
        kinds = {kind for _, kind in self.members}
        for row in rows:
            if "agent" in kinds and row.get("kind") == "agent" and (row.get("outcome") or {}).get("task"):
                return True
            ran = ((row.get("scores") or {}).get("execution") or {}).get("status")
            if "code" in kinds and row.get("tests") and row.get("entry_point") and not ran:
                return True
        return False

    def _build(self, sandbox: Sandbox) -> list[Verifier]:
        made: list[Verifier] = []
        for name, kind in self.members:
            if kind == "code":
                made.append(CodeVerifier(sandbox, self.limits, name=name))
            elif kind == "agent":
                made.append(AgentVerifier(sandbox, name=name))
            elif kind == "answer":
                made.append(AnswerVerifier(name=name))
            elif kind == "procedural":
                made.append(ProceduralVerifier(name=name))
            elif kind == "consistency":
                made.append(ConsistencyCheck(name=name))
            elif kind == "grader_note":
                made.append(GraderNoteCheck(name=name))
            else:
                made.append(ConstraintsVerifier(name=name))
        return made

    def verify(
        self,
        table: pa.Table,
        rows: Sequence[int],
        extra: Sequence[dict[str, Any]] | None = None,
    ) -> list[list[Verdict]]:
        """Per row of ``rows``, the verdicts of the verifiers that apply (``extra``: per row of the
        table, fields merged into what the verifiers read, e.g. ``ptf judge``'s columns)."""
        if not self.members or not rows:
            return [[] for _ in rows]
        picked = table.take(pa.array(list(rows), pa.int64()))
        probe = picked.select(
            [c for c in ("kind", "tests", "entry_point", "scores", "outcome") if c in picked.column_names]
        )
        looked = probe.to_pylist()
        if extra is not None:
            looked = [{**row, **extra[i]} for row, i in zip(looked, rows, strict=True)]
        opened = self.sandbox() if self.sandbox is not None and self._needs_sandbox(looked) else None
        verifiers = self._build(opened or _NoSandbox(self.limits))
        try:
            everything = verify_table(table, verifiers, rows=list(rows), extra=extra)
        finally:
            for verifier in verifiers:
                verifier.close()
            if opened is not None:
                opened.close()
        return [everything[i] for i in rows]

    def votes(self, verdicts: Sequence[Sequence[Verdict]]) -> list[list[Vote]]:
        """votes[verifier][row]: each verifier's vote on each row (an abstention where it did not apply)."""
        out: list[list[Vote]] = []
        for name, kind in self.members:
            column = []
            for row in verdicts:
                mine = next((v for v in row if v.verifier == name), None)
                column.append(verdict_vote(mine) if mine is not None else _none(name, kind))
            out.append(column)
        return out
