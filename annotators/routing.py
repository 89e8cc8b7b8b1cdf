"""Routing: auto-accept, auto-reject, or send to expert review, within a per-batch review budget.

- accept: judge mean >= ``accept_at`` and spread <= ``max_spread``
- reject: judge mean <= ``reject_at`` (not a preference candidate: see :func:`_auto`)
- review: everything else, most uncertain first, up to ``review_budget`` rows per batch; the rest
  ``wait`` (kept, never dropped) and compete for the next batches' budgets.

**Uncertainty** = spread of the counted scores + ``CONFIDENCE_WEIGHT`` × (1 − ``judge_confidence``).
The weight is 3: an LLM panel with no confidence at all counts as much as a spread of 3, the default
``max_spread``, i.e. the disagreement at which routing stops trusting the mean. A row without a
confidence (json votes, no LLM vote counted) gets ``UNKNOWN_CONFIDENCE`` = 0.5, neither sure nor
unsure, so it neither jumps nor loses the queue against rows whose judges said how sure they were.
A row no judge could score (no mean) is the most uncertain of all. Ties: the oldest batch first
(the order the caller gives, i.e. the batch partitions'), then sample_id, so reruns are identical.

**Waiting rows are never stranded.** The asset hands :func:`route` the stored routed output of the
earlier batches (``earlier``); their rows whose last routing verdict is ``wait`` compete for this
batch's budget with this batch's own rows, on the same uncertainty. A winner is copied into this
batch's output with a new decision (``route`` / ``needs_review``, the detail naming the batch whose
budget it used); its old copy stays in its own batch (an asset never rewrites another partition)
and readers keep the newest copy (:func:`~ptfactory.storage.schema.latest_copies`), so the row is
pushed, curated and published once. A row that lost ``max_wait_batches`` later budgets gets the
``silent`` verdict with reason ``waited_too_long``: ``review`` routes it over budget (a human still
decides: a disputed row is never published unreviewed and never left waiting forever), ``accept``
or ``reject`` apply that verdict. A waiting row whose sample_id comes again in this batch (kept or
dropped) sits this batch out, one id per partition, and competes again in the next.

**Audit.** A share ``audit_rate`` of this batch's auto-accepted and auto-rejected rows, drawn from a
hash of the sample_id (a rerun draws the same rows), at most ``audit_budget`` per batch (their own
budget, not the disputed rows'), goes to blind review: verdict ``route``, reason ``audit``, detail
``audit of auto_accept; <the judges' numbers>``. Curation applies the expert's label like any review,
and the kept auto verdict lets it score the judges against the expert on an unbiased sample.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.storage.schema import AUDIT_REASON, add_decision, conform, latest_copies, live_rows
from ptfactory.storage.schema.review import review_masks

__all__ = [
    "CONFIDENCE_WEIGHT",
    "ROUTES",
    "UNKNOWN_CONFIDENCE",
    "RoutingConfig",
    "audit_draw",
    "route",
    "uncertainty",
]

STAGE = "route"
# a preference row no judge scores because the sandbox vouches for it (an agent's solved rollout
# over a failed one): accepted as verified. Pairs the judges compare are "pairwise_candidate" rows.
VERIFIED_PAIR = "verified_pair"
_COMPARED = "pairwise_candidate"
ROUTES = (
    "auto_accept",
    "needs_review",
    "waiting",
    "auto_reject",
    AUDIT_REASON,
    "waited_too_long",
    VERIFIED_PAIR,
)
CONFIDENCE_WEIGHT = 3.0
UNKNOWN_CONFIDENCE = 0.5

Decision = tuple[str, str, str]  # verdict, reason, detail


@dataclass(frozen=True)
class RoutingConfig:
    accept_at: float = 7.0
    max_spread: float = 3.0
    reject_at: float = 3.0
    review_budget: int = 50
    silent: str = "review"  # rows no judge could score, or that waited too long: review | accept | reject
    max_wait_batches: int = 3  # later budgets a waiting row competes for before the silent verdict
    audit_rate: float = 0.02  # share of auto-accepted/rejected rows sent to blind review
    audit_budget: int = 5  # audit rows per batch, apart from review_budget


def uncertainty(scores: dict[str, Any] | None) -> float:
    """Spread + CONFIDENCE_WEIGHT × (1 − confidence); infinite when no judge vote counted."""
    scores = scores or {}
    if scores.get("judge_mean") is None:
        return float("inf")
    confidence = scores.get("judge_confidence")
    confidence = UNKNOWN_CONFIDENCE if confidence is None else min(max(float(confidence), 0.0), 1.0)
    return float(scores.get("judge_spread") or 0.0) + CONFIDENCE_WEIGHT * (1.0 - confidence)


def audit_draw(sample_id: str) -> float:
    """A number in [0, 1) fixed by the sample_id: the row is audited when it is below the rate."""
    digest = hashlib.blake2b(f"audit:{sample_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _why(scores: dict[str, Any] | None) -> str:
    scores = scores or {}
    if scores.get("judge_mean") is None:
        return "no counted judge vote"
    confidence = scores.get("judge_confidence")
    shown = "unknown" if confidence is None else f"{confidence:.2f}"
    spread = scores.get("judge_spread") or 0.0
    return f"uncertainty {uncertainty(scores):.2f} (spread {spread:.2f}, confidence {shown})"


class _Scores:
    """A table's judge mean, spread and confidence as arrays (with where each is set): the routing
    rules over whole columns, one Python string per decision only where a detail is written."""

    def __init__(self, table: pa.Table) -> None:
        scores = table.column("scores")
        self.mean, self.has_mean = _field(scores, "judge_mean")
        spread, has_spread = _field(scores, "judge_spread")
        self.spread = np.where(has_spread, spread, 0.0)  # `spread or 0.0`
        self.confidence, self.has_confidence = _field(scores, "judge_confidence")

    def uncertainty(self) -> np.ndarray[Any, Any]:
        """:func:`uncertainty` of every row."""
        confidence = np.where(self.has_confidence, np.clip(self.confidence, 0.0, 1.0), UNKNOWN_CONFIDENCE)
        spread = self.spread + CONFIDENCE_WEIGHT * (1.0 - confidence)
        return np.where(self.has_mean, spread, np.inf)

    def why(self, rows: np.ndarray[Any, Any]) -> list[str]:
        """:func:`_why` of each of ``rows``, from the arrays (the same numbers, the same text)."""
        u, spread, confidence = (a[rows].tolist() for a in (self.uncertainty(), self.spread, self.confidence))
        mean, stated = self.has_mean[rows].tolist(), self.has_confidence[rows].tolist()
        return [
            f"uncertainty {u[k]:.2f} (spread {spread[k]:.2f}, confidence "
            + (f"{confidence[k]:.2f})" if stated[k] else "unknown)")
            if mean[k]
            else "no counted judge vote"
            for k in range(len(u))
        ]

    def auto_detail(self, rows: np.ndarray[Any, Any], silent: str) -> list[str]:
        """The detail of each of ``rows``' automatic verdict."""
        mean, spread, has = self.mean[rows].tolist(), self.spread[rows].tolist(), self.has_mean[rows].tolist()
        return [
            f"mean {mean[k]:.2f}, spread {spread[k]:.2f}"
            if has[k]
            else f"no counted judge vote; routing.silent is {silent}"
            for k in range(len(mean))
        ]


def _field(scores: pa.ChunkedArray, name: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    values = pc.struct_field(scores, name)  # null where the row has no scores at all
    present = values.is_valid().to_numpy(False).astype(bool)
    return np.asarray(values.fill_null(0.0).to_numpy(False), np.float64), present


def _auto(scores: _Scores, preference: np.ndarray[Any, Any], config: RoutingConfig) -> np.ndarray[Any, Any]:
    """The automatic reason of every row (``auto_accept`` / ``auto_reject``), "" for a row that
    needs a human. A preference candidate is never rejected automatically: a low score there means
    the judges' comparisons contradict the scores that ordered the pair, and an expert settles which
    answer is better. A row no judge scored gets ``routing.silent`` where that is accept or reject."""
    reason = np.full(len(preference), "", dtype=object)
    mean = scores.mean
    accept = scores.has_mean & (mean >= config.accept_at) & (scores.spread <= config.max_spread)
    reject = scores.has_mean & ~accept & (mean <= config.reject_at) & ~preference
    reason[accept], reason[reject] = "auto_accept", "auto_reject"
    if config.silent in ("accept", "reject"):
        reason[~scores.has_mean] = f"auto_{config.silent}"
    return reason


def _audit(auto: list[int], ids: list[str], config: RoutingConfig) -> list[int]:
    """The drawn share of automatic verdicts (rows in ``auto``) that go to blind review, within
    their own budget: the lowest draws, ties by row."""
    if config.audit_rate <= 0 or config.audit_budget == 0:
        return []  # nothing can be drawn: no row's hash needs computing
    drawn = sorted((draw, i) for i in auto if (draw := audit_draw(ids[i])) < config.audit_rate)
    return [i for _, i in drawn[: config.audit_budget]]


def _codes(values: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, Any]:
    """An integer per distinct value (null: -1), to group by."""
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    codes: np.ndarray[Any, Any] = pc.dictionary_encode(array).indices.fill_null(-1).to_numpy(False)
    return codes.astype(np.int64)


def _waiting_earlier(
    earlier: pa.Table | None, here: pa.Array, position: dict[str, int], current: str
) -> tuple[pa.Table | None, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Earlier batches' rows still waiting (newest copy of each; a sample_id once, from its oldest
    batch), as candidates for this budget: (the earlier table, their rows, their batches' positions)."""
    none = np.zeros(0, dtype=np.int64)
    if earlier is None or earlier.num_rows == 0:
        return None, none, none
    earlier = latest_copies(conform(earlier))
    _, waiting = review_masks(earlier)
    ids = earlier.column("sample_id")
    away = pc.invert(pc.fill_null(pc.equal(earlier.column("batch"), current), False))
    fresh = pc.invert(pc.is_in(ids, value_set=here))  # a sample_id of this batch sits this batch out
    rows = np.flatnonzero(waiting & away.to_numpy(False) & fresh.to_numpy(False))
    if not len(rows):
        return earlier, none, none
    batches = earlier.column("batch").take(pa.array(rows, pa.int64())).to_pylist()
    start = np.array([position.get(b, -1) for b in batches], dtype=np.int64)
    # oldest batch first, then the first row: the copy of a sample_id that competes
    sids = _codes(ids.take(pa.array(rows, pa.int64())))
    order = np.lexsort((rows, start))
    _, first = np.unique(sids[order], return_index=True)
    keep = np.sort(order[first])
    return earlier, rows[keep], start[keep]


def route(
    table: pa.Table,
    config: RoutingConfig,
    *,
    batch: str | None = None,
    earlier: pa.Table | None = None,
    order: Sequence[str] | None = None,
) -> tuple[pa.Table, Counter[str]]:
    """This batch's rows with a ``route`` decision each (accept, reject — a drop —, route or wait),
    then the earlier batches' waiting rows that got a decision here (promoted, or waited too long).

    ``batch``: this batch's key (default: the rows' ``batch``); ``earlier``: the stored routed
    output of earlier batches; ``order``: batch keys oldest first (this batch is put last when
    missing). Counts are per reason, over every decision made here.
    """
    ids = table.column("sample_id").to_pylist()
    current = batch if batch is not None else (table.column("batch")[0].as_py() if table.num_rows else "")
    order = [b for b in (order or []) if b != current] + [current]
    position = {b: i for i, b in enumerate(order)}
    live = np.asarray(live_rows(table), dtype=np.int64)
    scores = _Scores(table)
    preference = pc.equal(table.column("kind"), "preference").fill_null(False).to_numpy(False).astype(bool)
    method = pc.struct_field(table.column("provenance"), "method").fill_null("")
    verified = preference & ~scores.has_mean & pc.not_equal(method, _COMPARED).to_numpy(False).astype(bool)
    reasons = _auto(scores, preference, config)
    reasons[verified] = VERIFIED_PAIR
    is_auto = reasons[live] != ""
    auto, disputed = live[is_auto], live[~is_auto]
    verdict: dict[int, Decision] = {}
    for i, detail in zip(auto.tolist(), scores.auto_detail(auto, config.silent), strict=True):
        reason = reasons[i]
        if reason == VERIFIED_PAIR:
            verdict[i] = ("accept", reason, "a pair the sandbox vouches for: no judge scores it")
            continue
        verdict[i] = (reason.removeprefix("auto_"), reason, detail)
    for i in _audit([i for i in auto.tolist() if reasons[i] != VERIFIED_PAIR], ids, config):
        _, reason, detail = verdict[i]
        verdict[i] = ("route", AUDIT_REASON, f"audit of {reason}; {detail}")
    here = pa.array(ids, pa.string())
    earlier_table, waiting, starts = _waiting_earlier(earlier, here, position, current)
    earlier_scores = _Scores(earlier_table) if earlier_table is not None else scores
    # most uncertain first, then the oldest batch, then sample_id (this batch's rows, then the
    # earlier ones, each in row order: the order a stable sort keeps among equal keys)
    n_here = len(disputed)
    uncertain = np.concatenate(
        [scores.uncertainty()[disputed], earlier_scores.uncertainty()[waiting] if len(waiting) else []]
    )
    positions = np.concatenate([np.full(n_here, position[current], np.int64), starts])
    sids = [ids[i] for i in disputed.tolist()]
    if len(waiting) and earlier_table is not None:
        sids += earlier_table.column("sample_id").take(pa.array(waiting, pa.int64())).to_pylist()
    ranked = pa.table(
        {"u": pa.array(-uncertain, pa.float64()), "p": positions, "s": pa.array(sids, pa.string())}
    )
    ranking = pc.sort_indices(ranked, [("u", "ascending"), ("p", "ascending"), ("s", "ascending")])
    carried: dict[int, Decision] = {}
    ranked_order = ranking.to_numpy(False)
    whys = np.empty(len(ranked_order), dtype=object)
    mine = ranked_order < n_here
    whys[mine] = scores.why(disputed[ranked_order[mine]])
    if not mine.all():
        whys[~mine] = earlier_scores.why(waiting[ranked_order[~mine] - n_here])
    disputed_rows, waiting_rows, starts_at = disputed.tolist(), waiting.tolist(), positions.tolist()
    for rank, (k, why) in enumerate(zip(ranked_order.tolist(), whys.tolist(), strict=True)):
        is_earlier = k >= n_here
        index = waiting_rows[k - n_here] if is_earlier else disputed_rows[k]
        if rank < config.review_budget and is_earlier:
            start = starts_at[k]
            since = order[start] if start >= 0 else "an earlier batch"
            decision: Decision = (
                "route",
                "needs_review",
                f"{why}; review slot of batch {current}, waiting since {since}",
            )
        elif rank < config.review_budget:
            decision = ("route", "needs_review", why)
        elif not is_earlier:
            decision = ("wait", "waiting", f"{why}; review budget of {config.review_budget} used")
        elif len(waited := tuple(order[starts_at[k] + 1 :])) >= config.max_wait_batches:
            decision = _too_long(why, waited, config)
        else:
            continue  # still waiting: its own batch's copy says so
        (carried if is_earlier else verdict)[index] = decision
    rows = live.tolist()
    routed = add_decision(
        table,
        STAGE,
        [verdict[i][0] for i in rows],
        [verdict[i][1] for i in rows],
        [verdict[i][2] for i in rows],
        rows=rows,
    )
    counts = Counter(verdict[i][1] for i in rows) + Counter(d[1] for d in carried.values())
    if carried and earlier_table is not None:
        routed = pa.concat_tables([conform(routed), _copies(earlier_table, carried)])
    return routed, counts


def _too_long(why: str, waited: tuple[str, ...], config: RoutingConfig) -> Decision:
    what = {
        "review": ("route", "routed over budget: an expert still decides"),
        "accept": ("accept", "accepted"),
        "reject": ("reject", "rejected"),
    }
    verdict, outcome = what.get(config.silent, what["review"])
    detail = (
        f"{why}; no review slot in batches {', '.join(waited)} (routing.max_wait_batches is "
        f"{config.max_wait_batches}); routing.silent is {config.silent}: {outcome}"
    )
    return (verdict, "waited_too_long", detail)


def _copies(earlier: pa.Table, decided: dict[int, Decision]) -> pa.Table:
    """The earlier rows decided here, each with its new decision appended (their batch unchanged)."""
    indices = sorted(decided)
    rows = earlier.take(pa.array(indices, pa.int64()))
    return add_decision(
        rows,
        STAGE,
        [decided[i][0] for i in indices],
        [decided[i][1] for i in indices],
        [decided[i][2] for i in indices],
    )
