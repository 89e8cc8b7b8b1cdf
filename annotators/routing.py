"""Routing: auto-accept, auto-reject, or send to expert review, within a per-batch review budget.

The verifiers decide first (``scores.verifiers``, annotators/judges/verifiers.py):

- a verifier's **fail** is final: reject (reason ``auto_reject``, the verifier named), whatever
  the judges said and whatever ``silent`` says; such a row is never accepted;
- a verifier's **no_answer** or **partial** (and no fail): review. Nothing to check is never a
  default score, part credit is no pass.

Then the panel, on rows with at least ``min_votes`` (2) **independent counted votes**
(``scores.judge_votes``: weight > 0 on the batch, not constant, different families or methods; two
verifiers reading the same evidence count once; annotators/judges/vote_columns.py):

- accept: judge mean >= ``accept_at`` and spread <= ``max_spread``
- reject: judge mean <= ``reject_at`` (not a preference candidate: see :func:`_auto`)
- review: everything else, most uncertain first, up to ``review_budget`` rows per batch; the rest
  ``wait`` (kept, never dropped) and compete for the next batches' budgets.

A row the privacy stage routed (``privacy.action: review``, or a redaction that would break its
code) is never auto-accepted: it competes for review like a disputed row.

A row with fewer counted votes than that, or none (no mean), is **silent**: ``routing.silent``
decides it (``review`` by default; ``accept`` or ``reject`` where a project chooses so).

**Uncertainty** = spread of the counted scores, + ``CONFIDENCE_WEIGHT`` × (1 − ``judge_confidence``)
where the votes stated a confidence (probability and pairwise votes do; likelihood, embedding and
verifier votes do not): no confidence is invented, the term is dropped. The weight is 3: a panel
with no confidence at all counts as much as a spread of 3, the default ``max_spread``. A row no judge
could score (no mean), and a row a verifier could not read (no_answer, partial), is the most
uncertain of all. Ties: the oldest batch first (the order the caller gives, i.e. the batch
partitions'), then sample_id, so reruns are identical.

**Waiting rows are never stranded.** Rows waiting for review live in the review queue
(:mod:`~ptfactory.annotators.review_queue`), one store for all batches: the queue hands
:func:`route` the rows of other batches that still wait (``waiting``), and they compete for this
batch's budget with this batch's own rows, on the same uncertainty. A winner gets a new decision
(``route`` / ``needs_review``, the detail naming the batch whose budget it used), which the queue
records in place of the row's old state, in the same transaction as the claim (two batches never
spend two budgets on one row); no partition is read or rewritten. A row that lost
``max_wait_batches`` later budgets gets the ``silent`` verdict with reason ``waited_too_long``:
``review`` routes it over budget (a human still decides: a disputed row is never published
unreviewed and never left waiting forever), ``accept`` or ``reject`` apply that verdict. A waiting
row whose sample_id comes again in this batch (kept or dropped) sits this batch out, and competes
again in the next.

**Audit.** A share ``audit_rate`` of this batch's auto-accepted and auto-rejected rows that no
verifier decided (a verifier's verdict needs no audit: it is a label already), and at least
``audit_min`` of them (a demo-sized batch gets some), drawn by a hash of the sample_id (a rerun draws
the same rows), at most ``audit_budget`` per batch (their own budget, not the disputed rows'), goes
to blind review: verdict ``route``, reason ``audit``, detail ``audit of auto_accept; drawn with
p=<share>; <the judges' numbers>`` (``p``: the row's probability of being drawn, what calibration's
selection correction divides by). Curation applies the expert's label like any review, and the
kept auto verdict lets it score the judges against the expert on an unbiased sample.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ptfactory.annotators.route_rules import (
    CONFIDENCE_WEIGHT,
    _audit,
    _auto,
    _Scores,
    audit_draw,
    uncertainty,
)
from ptfactory.section import Section
from ptfactory.storage.schema import AUDIT_REASON, add_decision, conform, live_rows
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
UNKNOWN_CONFIDENCE = None  # a row whose votes state no confidence: the term is dropped, not guessed

Decision = tuple[str, str, str]  # verdict, reason, detail


class RoutingConfig(Section):
    """The ``routing`` section of factory.yaml, and what :func:`route` reads."""

    accept_at: float = Field(7.0, ge=1, le=10, description="auto-accept at or above this judge mean...")
    max_spread: float = Field(3.0, ge=0, le=9, description="...when the judges disagree by at most this")
    reject_at: float = Field(3.0, ge=1, le=10, description="auto-reject at or below this judge mean")
    review_budget: int = Field(50, ge=0, description="rows per batch sent to expert review")
    silent: Literal["review", "accept", "reject"] = Field(
        "review",
        description=(
            "rows no judge could score, and rows that waited max_wait_batches for a review slot: "
            "review (routed, over budget) | accept | reject"
        ),
    )
    max_wait_batches: int = Field(
        3, ge=1, description="batches a row may wait for a review slot before it gets the `silent` verdict"
    )
    audit_rate: float = Field(
        0.05, ge=0, le=1, description="share of auto-accepted/rejected rows sent to blind audit review"
    )
    audit_min: int = Field(
        2, ge=0, description="audit at least this many automatic verdicts a batch (when audit_rate > 0)"
    )
    audit_budget: int = Field(5, ge=0, description="audit rows per batch (their own budget)")
    min_votes: int = Field(
        2,
        ge=2,
        description="independent counted votes (judge_votes) a row needs to be accepted or rejected automatically",
    )


def _codes(values: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, Any]:
    """An integer per distinct value (null: -1), to group by."""
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    codes: np.ndarray[Any, Any] = pc.dictionary_encode(array).indices.fill_null(-1).to_numpy(False)
    return codes.astype(np.int64)


def _waiting(
    waiting: pa.Table | None, here: pa.Array, position: dict[str, int], current: str
) -> tuple[pa.Table | None, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Other batches' rows still waiting (a sample_id once, from its oldest batch), as candidates
    for this budget: (the waiting table, their rows, their batches' positions)."""
    none = np.zeros(0, dtype=np.int64)
    if waiting is None or waiting.num_rows == 0:
        return None, none, none
    waiting = conform(waiting)
    _, still = review_masks(waiting)
    ids = waiting.column("sample_id")
    away = pc.invert(pc.fill_null(pc.equal(waiting.column("batch"), current), False))
    fresh = pc.invert(pc.is_in(ids, value_set=here))  # a sample_id of this batch sits this batch out
    rows = np.flatnonzero(still & away.to_numpy(False) & fresh.to_numpy(False))
    if not len(rows):
        return waiting, none, none
    batches = waiting.column("batch").take(pa.array(rows, pa.int64())).to_pylist()
    start = np.array([position.get(b, -1) for b in batches], dtype=np.int64)
    # oldest batch first, then the first row: the copy of a sample_id that competes
    sids = _codes(ids.take(pa.array(rows, pa.int64())))
    order = np.lexsort((rows, start))
    _, first = np.unique(sids[order], return_index=True)
    keep = np.sort(order[first])
    return waiting, rows[keep], start[keep]


def route(
    table: pa.Table,
    config: RoutingConfig,
    *,
    batch: str | None = None,
    waiting: pa.Table | None = None,
    order: Sequence[str] | None = None,
) -> tuple[pa.Table, Counter[str]]:
    """This batch's rows with a ``route`` decision each (accept, reject — a drop —, route or wait),
    then the other batches' waiting rows that got a decision here (promoted, or waited too long).

    ``batch``: this batch's key (default: the rows' ``batch``); ``waiting``: the review queue's
    waiting rows of other batches; ``order``: batch keys oldest first (this batch is put last when
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
    # privacy.action review (or a redaction that would break code): an expert decides, never auto-accept
    reasons[_privacy_review(table) & (reasons == "auto_accept")] = ""
    is_auto = reasons[live] != ""
    auto, disputed = live[is_auto], live[~is_auto]
    verdict: dict[int, Decision] = {}
    for i, detail in zip(auto.tolist(), scores.auto_detail(auto, config), strict=True):
        reason = reasons[i]
        if reason == VERIFIED_PAIR:
            verdict[i] = ("accept", reason, "a pair the sandbox vouches for: no judge scores it")
            continue
        verdict[i] = (reason.removeprefix("auto_"), reason, detail)
    audited, p = _audit(
        [i for i in auto.tolist() if reasons[i] != VERIFIED_PAIR], ids, config, scores.failed | scores.passed
    )
    for i in audited:
        _, reason, detail = verdict[i]
        verdict[i] = ("route", AUDIT_REASON, f"audit of {reason}; drawn with p={p:.4f}; {detail}")
    here = pa.array(ids, pa.string())
    earlier_table, queued, starts = _waiting(waiting, here, position, current)
    earlier_scores = _Scores(earlier_table) if earlier_table is not None else scores
    # most uncertain first, then the oldest batch, then sample_id (this batch's rows, then the
    # earlier ones, each in row order: the order a stable sort keeps among equal keys)
    n_here = len(disputed)
    uncertain = np.concatenate(
        [scores.uncertainty()[disputed], earlier_scores.uncertainty()[queued] if len(queued) else []]
    )
    positions = np.concatenate([np.full(n_here, position[current], np.int64), starts])
    sids = [ids[i] for i in disputed.tolist()]
    if len(queued) and earlier_table is not None:
        sids += earlier_table.column("sample_id").take(pa.array(queued, pa.int64())).to_pylist()
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
        whys[~mine] = earlier_scores.why(queued[ranked_order[~mine] - n_here])
    disputed_rows, waiting_rows, starts_at = disputed.tolist(), queued.tolist(), positions.tolist()
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
            continue  # still waiting: the queue keeps it as it is
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


def _privacy_review(table: pa.Table) -> np.ndarray[Any, Any]:
    """Rows the privacy stage sent to review (a ``privacy`` decision with verdict ``route``)."""
    decisions = table.column("decisions").combine_chunks()
    flagged = np.zeros(table.num_rows, dtype=bool)
    flat = pc.list_flatten(decisions)
    if len(flat):
        hit = pc.and_(pc.equal(flat.field("stage"), "privacy"), pc.equal(flat.field("verdict"), "route"))
        parents = pc.list_parent_indices(decisions).to_numpy(zero_copy_only=False)
        flagged[parents[hit.fill_null(False).to_numpy(zero_copy_only=False)]] = True
    return flagged


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
    """The waiting rows decided here, each with its new decision appended (their batch unchanged)."""
    indices = sorted(decided)
    rows = earlier.take(pa.array(indices, pa.int64()))
    return add_decision(
        rows,
        STAGE,
        [decided[i][0] for i in indices],
        [decided[i][1] for i in indices],
        [decided[i][2] for i in indices],
    )
