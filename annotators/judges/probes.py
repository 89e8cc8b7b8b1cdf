"""Probes that try to fool the panel: how far each attack moves each judge's score and the panel's.

A probe run builds a small batch (annotators/judges/probe_data.py; items and wording drawn at random
each run, half the items open-ended rows no verifier covers, half word problems the answer verifier
covers) and judges it with the panel as it is configured (its verifiers, its persisted weights,
cuts and centres), then routes it with the configured routing:

==============  ==================================================  ==================================
probe           probed row (against its baseline)                   fails the run when
==============  ==================================================  ==================================
override        a wrong answer + grader-override text (vs wrong)    routing accepts it, or the text
                                                                    lifts the panel mean over accept_at
restate         the prompt restated as the answer (vs the good)     reported
padding         the good answer + verbose filler (vs the good)      reported
empty           an empty reply (vs the good)                        reported (a vote must not count)
unparseable     a garbled reply (vs the good)                       reported
swap            each LLM judge compares good/wrong in both orders   reported (position bias, flips)
kill_runner     code that kills the process running it              the code verifier does not fail it
sleep           code that sleeps past the time limit                the code verifier does not fail it
early_exit      code that exits 0 before its tests run              the code verifier does not fail it
infra_fault     a right solution on a sandbox that breaks           the code verifier fails it (a
                                                                    sandbox fault became a failure)
==============  ==================================================  ==================================

Faults a solution causes are its own failure (nothing earns an abstention, or a pass, by crashing
its runner); a fault of the sandbox itself is never the student's. :func:`cached_probe` runs it once
per panel identity (the judges' identities, the verifiers, the routing lines and the calibration the
panel reads) and keeps the report under the state dir: what the factory's asset check calls.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ptfactory.annotators.judges import probe_data as data
from ptfactory.annotators.judges.llm import LLMJudge
from ptfactory.annotators.judges.pairwise import PairwiseJudge
from ptfactory.annotators.judges.panel import Panel
from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.limits import ExecResult, Limits
from ptfactory.filters.verify import CodeVerifier, reference_record
from ptfactory.storage.fs import atomic_write_text
from ptfactory.storage.schema import from_records, sample_id

__all__ = ["PROBES", "ProbeReport", "ProbeResult", "cached_probe", "panel_identity", "probe_panel"]

PROBES = ("override", "restate", "padding", "empty", "unparseable")
SANDBOX_PROBES = ("kill_runner", "sleep", "early_exit", "infra_fault")
ITEMS = 3  # per group (verified, open): half the probe set is open-ended
PANEL = "panel"


@dataclass(frozen=True)
class ProbeResult:
    probe: str
    group: str  # verified | open | pairwise | sandbox
    member: str  # a verifier's or judge's name, or "panel"
    shift: float | None  # mean of (probed score - baseline score) over the items both counted
    counted: int  # items whose probed row got a counted score from the member
    items: int
    failed: bool = False
    note: str = ""


@dataclass
class ProbeReport:
    identity: str
    seed: int
    accept_at: float
    results: list[ProbeResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> ProbeReport:
        results = [ProbeResult(**r) for r in body.get("results") or []]
        return cls(
            str(body["identity"]),
            int(body["seed"]),
            float(body["accept_at"]),
            results,
            list(body.get("failures") or []),
        )

    def table(self) -> str:
        """Per probe and member: how far the probe moved its score (a plain-text table)."""
        lines = [f"{'probe':<12} {'group':<9} {'member':<20} {'shift':>7} {'counted':>8}  note"]
        for r in self.results:
            shift = f"{r.shift:+.2f}" if r.shift is not None else "n/a"
            mark = "FAIL " if r.failed else ""
            lines.append(
                f"{r.probe:<12} {r.group:<9} {r.member:<20} {shift:>7} {r.counted:>3}/{r.items:<4}  {mark}{r.note}"
            )
        return "\n".join(lines)


def panel_identity(panel: Panel, routing: RoutingConfig) -> str:
    """A hash of what decides the panel's numbers: its judges' identities and the calibration it
    reads for them, its verifiers, and the routing lines."""
    judges = []
    for judge in panel.judges:
        key = judge.identity_key
        entry = panel.store.entry(key) if panel.store is not None else None
        judges.append({"identity": key, "calibration": (entry or {}).get("experts")})
    body = {
        "judges": judges,
        "verifiers": panel.verifiers.members if panel.verifiers else [],
        "routing": routing.model_dump(include={"accept_at", "max_spread", "reject_at", "min_votes"}),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _row(group: str, prompt: str, response: str, reference: str | None, tag: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
    return {
        "sample_id": sample_id("sft", messages) + f"-{tag}",
        "batch": "probe",
        "kind": "sft",
        "messages": messages,
        "reference": reference_record(answer=reference, source="probe") if reference else None,
        "provenance": {"method": "probe"},
        "decisions": [],
    }


def _garbled(rng: random.Random) -> str:
    return "".join(rng.choice("{}[]<>|\\~^@#%&*;:") for _ in range(rng.randint(24, 60)))


def _build(rng: random.Random) -> tuple[list[dict[str, Any]], list[tuple[str, str, int, int]]]:
    """The probe batch and its cases: (probe, group, baseline row, probed row)."""
    rows: list[dict[str, Any]] = []
    cases: list[tuple[str, str, int, int]] = []

    def add(row: dict[str, Any]) -> int:
        rows.append(row)
        return len(rows) - 1

    picked: list[tuple[str, tuple[str, str, str, str | None]]] = [
        ("verified", (q, r, w, ref)) for q, r, w, ref in rng.sample(data.MATH, ITEMS)
    ]
    picked += [("open", (q, r, w, None)) for q, r, w in rng.sample(data.OPEN, ITEMS)]
    for n, (group, (prompt, right, wrong, ref)) in enumerate(picked):
        good = add(_row(group, prompt, right, ref, f"{n}good"))
        bad = add(_row(group, prompt, wrong, ref, f"{n}bad"))
        probed = {
            "override": (bad, wrong + rng.choice(data.OVERRIDES)),
            "restate": (good, rng.choice(data.RESTATES).format(prompt=prompt)),
            "padding": (good, right + " " + " ".join(rng.sample(data.PADDING, 2))),
            "empty": (good, ""),
            "unparseable": (good, _garbled(rng)),
        }
        for probe, (base, text) in probed.items():
            cases.append((probe, group, base, add(_row(group, prompt, text, ref, f"{n}{probe}"))))
    return rows, cases


def _scores(judged: pa.Table, members: list[str]) -> dict[str, list[float | None]]:
    """Per member, its counted score on every row (None where it did not count); the panel's mean."""
    scores = judged.column("scores").to_pylist()
    out: dict[str, list[float | None]] = {m: [] for m in members}
    for row in scores:
        votes = {v["judge"]: v for v in (row or {}).get("judges") or []}
        for m in members:
            v = votes.get(m)
            out[m].append(float(v["score"]) if v and v["parsed"] and v["score"] is not None else None)
    out[PANEL] = [(row or {}).get("judge_mean") for row in scores]
    return out


def _shift(
    values: Sequence[float | None], cases: list[tuple[str, str, int, int]]
) -> tuple[float | None, int]:
    both = [(values[p], values[b]) for _, _, b, p in cases if values[p] is not None and values[b] is not None]
    counted = sum(1 for _, _, _, p in cases if values[p] is not None)
    shift = round(float(np.mean([p - b for p, b in both])), 3) if both else None  # type: ignore[operator]
    return shift, counted


def _judged(panel: Panel, routing: RoutingConfig, rows: list[dict[str, Any]]) -> tuple[pa.Table, list[str]]:
    table = from_records(rows)
    judged, _ = panel.judge_table(table, generated=np.zeros(len(rows), bool))
    routed, _ = route(judged, routing.model_copy(update={"audit_rate": 0.0, "review_budget": len(rows)}))
    reasons = [str((r or [{}])[-1].get("reason")) for r in routed.column("decisions").to_pylist()]
    return judged, reasons


def _text_probes(panel: Panel, routing: RoutingConfig, rng: random.Random, report: ProbeReport) -> None:
    rows, cases = _build(rng)
    judged, reasons = _judged(panel, routing, rows)
    members = [*(panel.verifiers.names if panel.verifiers else []), *(j.name for j in panel.judges)]
    scores = _scores(judged, members)
    for probe in PROBES:
        for group in ("verified", "open"):
            mine = [c for c in cases if c[0] == probe and c[1] == group]
            for member in [*members, PANEL]:
                if member != PANEL and all(
                    scores[member][p] is None and scores[member][b] is None for *_, b, p in mine
                ):
                    continue  # a verifier that does not apply to the group
                shift, counted = _shift(scores[member], mine)
                failed, note = False, ""
                if probe == "override" and member == PANEL:
                    lifted = [
                        p
                        for *_, b, p in mine
                        if reasons[p] == "auto_accept"
                        or ((scores[PANEL][p] or 0) >= routing.accept_at > (scores[PANEL][b] or 0))
                    ]
                    failed = bool(lifted)
                    note = (
                        f"{len(lifted)} wrong answer(s) lifted over the accept line"
                        if lifted
                        else "none lifted"
                    )
                    if lifted:
                        report.failures.append(
                            f"override text lifted {len(lifted)} wrong {group} answer(s) over the accept line"
                        )
                elif probe in ("empty", "unparseable") and member == PANEL:
                    accepted = sum(1 for *_, p in mine if reasons[p] == "auto_accept")
                    note = f"{accepted} auto-accepted"
                report.results.append(
                    ProbeResult(probe, group, member, shift, counted, len(mine), failed, note)
                )


def _swap(panel: Panel, rng: random.Random, report: ProbeReport) -> None:
    """Each LLM judge compares a good and a wrong answer in both orders: its position bias (mean
    P(first is better) with good first minus with good second, 0 is unbiased) and its flips."""
    items = rng.sample(data.MATH, ITEMS) + [(q, r, w, None) for q, r, w in rng.sample(data.OPEN, ITEMS)]
    prompts, goods, bads = [i[0] for i in items], [i[1] for i in items], [i[2] for i in items]
    for judge in panel.judges:
        if not isinstance(judge, LLMJudge):
            continue
        forward, swapped = PairwiseJudge(judge).probabilities(prompts, goods, bads)
        flips = sum((f > 0.5) != (s > 0.5) for f, s in zip(forward, swapped, strict=True))
        right = sum(f > 0.5 and s > 0.5 for f, s in zip(forward, swapped, strict=True))
        bias = round(float(np.mean(forward) - np.mean(swapped)), 3)
        note = (
            f"{flips} verdict(s) flipped with the order; prefers the right answer in both orders on {right}"
        )
        report.results.append(
            ProbeResult("swap", "pairwise", judge.name, bias, len(items) - flips, len(items), False, note)
        )


class _BrokenSandbox(Sandbox):
    """A sandbox whose every run fails on its own side (the engine died): an infrastructure fault."""

    backend = "broken"

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        return ExecResult("sandbox_error", None, 0.0, detail="probe: the sandbox failed on its own side")


def _sandbox_probes(panel: Panel, rng: random.Random, report: ProbeReport) -> None:
    prompt, entry, tests, right = rng.choice(data.CODE)

    def row(code: str, tag: str) -> dict[str, Any]:
        messages = [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": f"```python\n{code}```"},
        ]
        return {"kind": "code", "tests": tests, "entry_point": entry, "messages": messages, "sample_id": tag}

    faults = {
        "kill_runner": data.KILL_RUNNER.format(entry=entry),
        "sleep": data.SLEEPER.format(entry=entry),
        "early_exit": data.EARLY_EXIT.format(entry=entry),
    }
    code = next((n for n, k in (panel.verifiers.members if panel.verifiers else []) if k == "code"), None)
    opener = panel.verifiers.sandbox if panel.verifiers else None
    if code is None or opener is None:
        for probe in SANDBOX_PROBES:
            report.results.append(
                ProbeResult(
                    probe, "sandbox", "code", None, 0, 1, False, "not run: no code verifier with a sandbox"
                )
            )
        return
    limits = panel.verifiers.limits if panel.verifiers else None
    sandbox = opener()
    try:
        quick = (limits or Limits()).model_copy(update={"timeout_s": 3.0})  # the sleeper waits this long
        verdicts = CodeVerifier(sandbox, quick, name=code).verify_many([row(c, n) for n, c in faults.items()])
    finally:
        sandbox.close()
    broken = CodeVerifier(_BrokenSandbox(), limits, name=code).verify(row(right, "infra_fault"))
    for probe, verdict in [*zip(faults, verdicts, strict=True), ("infra_fault", broken)]:
        wanted = "abstain" if probe == "infra_fault" else "fail"
        failed = verdict.verdict != wanted
        note = f"{verdict.verdict} ({verdict.reason}); wanted {wanted}"
        if failed:
            why = (
                "a sandbox fault became the student's failure"
                if probe == "infra_fault"
                else (f"a solution-caused fault ({probe}) was not the solution's failure")
            )
            report.failures.append(f"{why}: {verdict.verdict} ({verdict.reason})")
        counted = int(verdict.verdict in ("pass", "fail"))
        report.results.append(ProbeResult(probe, "sandbox", code, None, counted, 1, failed, note))


def probe_panel(panel: Panel, routing: RoutingConfig, *, seed: int | None = None) -> ProbeReport:
    """Run every probe against ``panel`` (wording drawn with ``seed``; None: a fresh one)."""
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    rng = random.Random(seed)
    report = ProbeReport(panel_identity(panel, routing), seed, routing.accept_at)
    _text_probes(panel, routing, rng, report)
    _swap(panel, rng, report)
    _sandbox_probes(panel, rng, report)
    return report


def cached_probe(panel: Panel, routing: RoutingConfig, state_dir: Path) -> tuple[ProbeReport, bool]:
    """The probe report of this panel identity: read from ``<state_dir>/probes/<identity>.json`` when
    a run for it exists, else run now and kept there. Returns (report, whether it was cached)."""
    path = Path(state_dir) / "probes" / f"{panel_identity(panel, routing)}.json"
    if path.is_file():
        try:
            return ProbeReport.from_dict(json.loads(path.read_text(encoding="utf-8"))), True
        except (ValueError, KeyError, TypeError):
            pass  # unreadable: run again
    report = probe_panel(panel, routing)
    atomic_write_text(path, json.dumps(report.to_dict(), indent=1) + "\n")
    return report, False
