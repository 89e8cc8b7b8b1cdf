"""annotators/routing.py's ``route`` row by row: the accept/reject rules, uncertainty and the audit
draw written from issue 37's text (``_auto``, ``uncertainty``, ``_audit``); the queue around them as
it was before it worked on Arrow columns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ptfactory.annotators.route_rules import _why, audit_draw
from ptfactory.annotators.routing import RoutingConfig, _too_long
from ptfactory.storage.schema import AUDIT_REASON, SAMPLE_SCHEMA, add_decision, conform, is_waiting, live_rows

STAGE = "route"

Decision = tuple[str, str, str]  # verdict, reason, detail


@dataclass(frozen=True)
class _Candidate:
    uncertainty: float
    position: int  # of its batch in the order, oldest first
    sample_id: str
    index: int  # row in its table (this batch's, or the earlier batches')
    earlier: bool
    waited: tuple[str, ...]  # later batches whose budget it competed for, this one included

    def key(self) -> tuple[float, int, str]:
        return (-self.uncertainty, self.position, self.sample_id)


def uncertainty(scores: dict[str, Any] | None) -> float:
    """Issue 37: real confidences or no term. Spread, + 3 (1 - confidence) where one is stated;
    infinite without a mean or where a verifier found no answer it could check."""
    scores = scores or {}
    verdicts = {v["verdict"] for v in scores.get("verifiers") or []}
    if scores.get("judge_mean") is None or (verdicts & {"no_answer", "partial"} and "fail" not in verdicts):
        return float("inf")
    spread = scores.get("judge_spread") or 0.0
    confidence = scores.get("judge_confidence")
    if confidence is None:
        return spread
    return spread + 3.0 * (1.0 - min(max(confidence, 0.0), 1.0))


def _auto(
    scores: dict[str, Any] | None, config: RoutingConfig, kind: str | None = None, method: str | None = None
) -> Decision | None:
    """The automatic verdict, or None for a row that needs a human, as issue 37 states the rules: a
    verifier's fail is final (reject, whatever else); no_answer or partial: review; otherwise two
    independent counted votes decide by the accept / reject lines, and a row with fewer is silent.
    A preference candidate is never rejected automatically; a pair no judge scored and not a
    pairwise candidate is a pair the sandbox vouches for."""
    scores = scores or {}
    mean, spread = scores.get("judge_mean"), scores.get("judge_spread") or 0.0
    votes = scores.get("judge_votes") or 0
    verdicts = scores.get("verifiers") or []
    failed = [v for v in verdicts if v["verdict"] == "fail"]
    if mean is None and kind == "preference" and method != "pairwise_candidate":
        return ("accept", "verified_pair", "a pair the sandbox vouches for: no judge scores it")
    if failed:
        return (
            "reject",
            "auto_reject",
            f"verifier fail (final): {failed[0]['verifier']}: {failed[0]['reason']}",
        )
    if any(v["verdict"] in ("no_answer", "partial") for v in verdicts):
        return None
    if mean is None or votes < config.min_votes:
        if config.silent == "accept" or (config.silent == "reject" and kind != "preference"):
            detail = (
                f"no counted judge vote; routing.silent is {config.silent}"
                if mean is None
                else f"mean {mean:.2f} on {votes} independent counted vote(s), under routing.min_votes "
                f"{config.min_votes}; routing.silent is {config.silent}"
            )
            return (config.silent, f"auto_{config.silent}", detail)
        return None
    detail = f"mean {mean:.2f}, spread {spread:.2f}, {votes} independent votes"
    if mean >= config.accept_at and spread <= config.max_spread:
        return ("accept", "auto_accept", detail)
    if mean <= config.reject_at and kind != "preference":
        return ("reject", "auto_reject", detail)
    return None


def _audit(verdict: dict[int, Decision], ids: list[str], config: RoutingConfig, decided: set[int]) -> None:
    """Send the drawn share of automatic verdicts no verifier decided to blind review (at least
    ``audit_min``), within their own budget; the detail says the probability of being drawn."""
    pool = [i for i, (_, reason, _) in verdict.items() if reason.startswith("auto_") and i not in decided]
    if config.audit_rate <= 0 or config.audit_budget == 0 or not pool:
        return
    ranked = sorted((audit_draw(ids[i]), i) for i in pool)
    wanted = max(sum(1 for draw, _ in ranked if draw < config.audit_rate), min(config.audit_min, len(pool)))
    picked = ranked[: min(wanted, config.audit_budget)]
    for _, i in picked:
        _, reason, detail = verdict[i]
        p = len(picked) / len(pool)
        verdict[i] = ("route", AUDIT_REASON, f"audit of {reason}; drawn with p={p:.4f}; {detail}")


def _waiting(
    waiting: pa.Table | None, here: set[str], position: dict[str, int], order: list[str], current: str
) -> tuple[pa.Table | None, list[_Candidate]]:
    """Other batches' rows still waiting (a sample_id once, oldest batch first), as candidates."""
    if waiting is None or waiting.num_rows == 0:
        return None, []
    earlier = conform(waiting)
    now = position[current]
    out: list[_Candidate] = []
    seen: set[str] = set()
    rows = earlier.select(["sample_id", "batch", "scores", "decisions"]).to_pylist()
    oldest_first = sorted(
        range(len(rows)), key=lambda i: (position.get(rows[i]["batch"], -1), rows[i]["sample_id"])
    )
    for i in oldest_first:
        row = rows[i]
        sid, origin = row["sample_id"], row["batch"]
        if origin == current or sid in here or sid in seen or not is_waiting(row["decisions"]):
            continue
        seen.add(sid)
        start = position.get(origin, -1)
        waited = tuple(order[start + 1 : now + 1])
        out.append(_Candidate(uncertainty(row["scores"]), start, sid, i, True, waited))
    return earlier, out


def route(
    table: pa.Table,
    config: RoutingConfig,
    *,
    batch: str | None = None,
    waiting: pa.Table | None = None,
    order: Sequence[str] | None = None,
) -> tuple[pa.Table, Counter[str]]:
    """This batch's rows with a ``route`` decision each (accept, reject — a drop —, route or wait),
    then the earlier batches' waiting rows that got a decision here (promoted, or waited too long).

    ``batch``: this batch's key (default: the rows' ``batch``); ``waiting``: the review queue's
    waiting rows of other batches; ``order``: batch keys oldest first (this batch is put last when
    missing). Counts are per reason, over every decision made here.
    """
    rows = table.select(["sample_id", "batch", "kind", "scores", "provenance"]).to_pylist()
    current = batch if batch is not None else (rows[0]["batch"] if rows else "")
    order = [b for b in (order or []) if b != current] + [current]
    position = {b: i for i, b in enumerate(order)}
    live = live_rows(table)
    ids = [r["sample_id"] for r in rows]
    verdict: dict[int, Decision] = {}
    candidates: list[_Candidate] = []
    for i in live:
        auto = _auto(rows[i]["scores"], config, rows[i]["kind"], (rows[i]["provenance"] or {}).get("method"))
        if auto is not None:
            verdict[i] = auto
        else:
            candidates.append(
                _Candidate(uncertainty(rows[i]["scores"]), position[current], ids[i], i, False, ())
            )
    decided = {
        i
        for i in live
        if any(v["verdict"] in ("pass", "fail") for v in (rows[i]["scores"] or {}).get("verifiers") or [])
    }
    _audit(verdict, ids, config, decided)
    earlier_table, queued = _waiting(waiting, set(ids), position, order, current)
    candidates.extend(queued)
    earlier_rows = earlier_table.select(["scores"]).to_pylist() if earlier_table is not None else []
    carried: dict[int, Decision] = {}
    for rank, cand in enumerate(sorted(candidates, key=_Candidate.key)):
        scores = earlier_rows[cand.index]["scores"] if cand.earlier else rows[cand.index]["scores"]
        why = _why(scores)
        if rank < config.review_budget and cand.earlier:
            since = order[cand.position] if cand.position >= 0 else "an earlier batch"
            decision: Decision = (
                "route",
                "needs_review",
                f"{why}; review slot of batch {current}, waiting since {since}",
            )
        elif rank < config.review_budget:
            decision = ("route", "needs_review", why)
        elif not cand.earlier:
            decision = ("wait", "waiting", f"{why}; review budget of {config.review_budget} used")
        elif len(cand.waited) >= config.max_wait_batches:
            decision = _too_long(why, cand.waited, config)
        else:
            continue  # still waiting: the queue keeps it as it is
        (carried if cand.earlier else verdict)[cand.index] = decision
    routed = add_decision(
        table,
        STAGE,
        [verdict[i][0] for i in live],
        [verdict[i][1] for i in live],
        [verdict[i][2] for i in live],
        rows=live,
    )
    counts = Counter(verdict[i][1] for i in live) + Counter(d[1] for d in carried.values())
    if carried and earlier_table is not None:
        routed = pa.concat_tables([conform(routed), _copies(earlier_table, carried)])
    return routed, counts


def _copies(earlier: pa.Table, decided: dict[int, Decision]) -> pa.Table:
    """The earlier rows decided here, each with its new decision appended (their batch unchanged)."""
    indices = sorted(decided)
    records = earlier.take(pa.array(indices, pa.int64())).to_pylist()
    for record, index in zip(records, indices, strict=True):
        verdict, reason, detail = decided[index]
        record["decisions"] = [
            *(record["decisions"] or []),
            {"stage": STAGE, "verdict": verdict, "reason": reason, "detail": detail},
        ]
    return pa.Table.from_pylist(records, schema=SAMPLE_SCHEMA)
