"""Fold expert labels into the routed samples: ``curated_samples``.

- The label log is replayed: per (sample, annotator) the latest event counts; a deletion removes
  that annotator's label; several annotators are combined by majority (a tie decides nothing).
- accept → the row goes on (``review/accept``); reject → dropped (``review/reject``); a corrected
  response replaces the last assistant turn (``review/edit``, the original kept in the decision's
  detail and the annotation record), and the (corrected, original) pair also becomes a preference
  row; a preference choice of B swaps chosen and rejected, a tie drops the pair.
- Rows with no label yet stay as they were: still awaiting review (or waiting for a review slot),
  never published, never lost. ``routed`` holds each row once, as routing or the review queue last
  left it (:mod:`~ptfactory.annotators.recuration` hands over what changed since the last curation).
- A reviewed agent trajectory gets ``step_labels`` from the expert's first wrong step, and a
  preference pair on the prefix before it where a solved rollout of its task acted differently
  there after the same actions (:mod:`~ptfactory.annotators.trajectory_review`).
- Audit rows (routing reason ``audit``) are labeled like any other; the automatic verdict they
  carry is compared with the expert's: ``audit_agreement`` over ``audit_pairs``, an unbiased
  estimate of how often the auto-accept/reject bands are right.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.labelstudio.results import Label, combine, parse_result
from ptfactory.annotators.pairs import auto_pairs, pair_sources, preference_row
from ptfactory.annotators.trajectory_review import prefix_pairs, prefix_sources, step_labels
from ptfactory.storage.schema import (  # awaiting_review: the one predicate, which review_masks vectorizes
    AUDIT_REASON,
    SAMPLE_SCHEMA,
    audited_verdict,
    awaiting_review,  # noqa: F401
    conform,
)
from ptfactory.storage.schema.review import review_masks

__all__ = ["DERIVED_PAIRS", "Curated", "LabelState", "curate", "replay", "summarize"]

STAGE = "review"
REVIEW_STAGES = (STAGE, "pair")  # the decisions a curated row's outcome is read from


@dataclass
class LabelState:
    """The labels in force after replaying the log."""

    per_annotator: dict[str, dict[str, tuple[Label, dict[str, Any]]]]  # sample -> annotator -> (label, event)

    def decided(self) -> dict[str, tuple[Label, list[dict[str, Any]]]]:
        out = {}
        for sid, by_annotator in self.per_annotator.items():
            events = sorted(by_annotator.values(), key=lambda item: item[1]["seq"])
            label = combine([lab for lab, _ in events])
            if label is not None:
                out[sid] = (label, [ev for _, ev in events])
        return out


def replay(events: pa.Table) -> LabelState:
    current: dict[int, dict[str, Any]] = {}
    for event in events.to_pylist():  # in seq order: later events supersede
        if event["event"] == "deleted":
            current.pop(event["annotation_id"], None)
        else:
            current[event["annotation_id"]] = event
    per: dict[str, dict[str, tuple[Label, dict[str, Any]]]] = defaultdict(dict)
    for event in sorted(current.values(), key=lambda e: e["seq"]):
        if not event["sample_id"]:
            continue
        label = parse_result(event["result"], bool(event["was_cancelled"]))
        per[event["sample_id"]][event["annotator"] or f"#{event['annotation_id']}"] = (label, event)
    return LabelState(dict(per))


@dataclass
class Curated:
    table: pa.Table
    counts: Counter[str] = field(default_factory=Counter)
    per_annotator: Counter[str] = field(default_factory=Counter)
    inter_annotator_alpha: float | None = None
    multi_annotated: int = 0
    judge_human_agreement: float | None = None
    judge_human_pairs: int = 0
    audit_agreement: float | None = None  # share of audited auto verdicts the expert agreed with
    audit_pairs: int = 0


def _last_assistant(messages: list[dict[str, str]]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant":
            return index
    return None


def _annotation(label: Label, events: list[dict[str, Any]], original: str | None) -> dict[str, Any]:
    last = events[-1]
    lead = [e["lead_time_s"] for e in events if e["lead_time_s"] is not None]
    return {
        "project_id": last["project_id"],
        "task_id": last["task_id"],
        "annotation_id": last["annotation_id"],
        "annotator": ",".join(sorted({e["annotator"] or "?" for e in events})),
        "verdict": label.verdict,
        "rating": label.rating,
        "edited_response": label.corrected if original is not None else None,
        "preference": label.preference,
        "lead_time_s": sum(lead) if lead else None,
    }


def _agrees(auto: str, label: Label) -> bool:
    """Did the expert confirm the automatic verdict (a preference pair: kept as it is)?"""
    if label.preference:
        return (label.preference == "A") == (auto == "auto_accept")
    return (label.verdict == "accept") == (auto == "auto_accept")


def _review(
    row: dict[str, Any], label: Label, evs: list[dict[str, Any]], keys: list[str]
) -> tuple[dict[str, Any] | None, bool | None]:
    """Apply the expert's label to one routed row (in place): the preference row a correction makes
    (or None), and whether the expert agreed with the automatic verdict of an audit row (None: not
    an audit row). ``keys`` gets the counts this row adds, in order."""
    trail = list(row["decisions"] or [])
    auto = audited_verdict(trail)
    agreed = _agrees(auto, label) if auto is not None else None
    who = ", ".join(sorted({e["annotator"] or "?" for e in evs}))
    pair = None
    if row.get("steps") and label.first_error is not None:
        row["step_labels"] = step_labels(len(row["steps"]), label.first_error, who)
        keys.append("step_labelled")
    if label.preference:  # an A/B choice; a verdict on a pair (accept/reject) follows below
        if label.preference == "tie":
            trail.append({"stage": STAGE, "verdict": "reject", "reason": "human_tie", "detail": f"by {who}"})
            keys.append("rejected")
        else:
            if label.preference == "B":
                row["chosen"], row["rejected"] = row["rejected"], row["chosen"]
            trail.append(
                {
                    "stage": STAGE,
                    "verdict": "accept",
                    "reason": f"human_prefers_{label.preference}",
                    "detail": f"by {who}" + (f": {label.reason}" if label.reason else ""),
                }
            )
            keys.append("accepted")
        row["annotation"] = _annotation(label, evs, None)
    elif label.verdict == "reject":
        trail.append({"stage": STAGE, "verdict": "reject", "reason": "human_reject", "detail": f"by {who}"})
        row["annotation"] = _annotation(label, evs, None)
        keys.append("rejected")
    else:
        at = _last_assistant(row["messages"])
        original = row["messages"][at]["content"] if at is not None else None
        # the box starts with the response: submitted unchanged (or with whitespace only
        # trimmed — results.py strips) it is an accept, not a correction
        if label.corrected and at is not None and label.corrected.strip() != (original or "").strip():
            messages = [dict(m) for m in row["messages"]]
            messages[at]["content"] = label.corrected
            row["messages"] = messages
            detail = json.dumps({"by": who, "original": original}, ensure_ascii=False)
            trail.append({"stage": STAGE, "verdict": "edit", "reason": "human_correction", "detail": detail})
            pair = _pair_row(row, messages, original or "", trail, who)
            keys.append("corrected")
        else:
            trail.append(
                {"stage": STAGE, "verdict": "accept", "reason": "human_accept", "detail": f"by {who}"}
            )
            keys.append("accepted")
        row["annotation"] = _annotation(label, evs, original)
    row["decisions"] = trail
    return pair, agreed


def curate(routed: pa.Table, events: pa.Table, accept_at: float = 7.0, pairs: bool = True) -> Curated:
    """Every routed row, in order, the labelled ones as the expert decided
    (a correction's preference row just before its row), then the pairs (:mod:`pairs`,
    :mod:`trajectory_review`). Only the labelled rows, and the rows a pair can be made of, become
    Python dicts: the rest of the batch is carried in Arrow as it came."""
    state = replay(events)
    decided = state.decided()
    routed = conform(routed)
    n = routed.num_rows
    awaiting, waiting = review_masks(routed)
    ids = routed.column("sample_id")
    known = pc.is_in(ids, value_set=pa.array(list(decided), pa.string())).to_numpy(zero_copy_only=False)
    labelled = np.flatnonzero(awaiting & known.astype(bool))
    # counts keep the order a row-by-row pass would have given them (first row that adds each)
    first: dict[str, tuple[int, int]] = {}
    counts: Counter[str] = Counter()
    for key, mask in (("awaiting", awaiting & ~known), ("waiting", ~awaiting & waiting)):
        if mask.any():
            counts[key] = int(mask.sum())
            first[key] = (int(np.argmax(mask)), 0)
    audited: list[bool] = []
    emitted: list[dict[str, Any]] = []
    sizes = np.ones(n, dtype=np.int64)
    rows = routed.take(pa.array(labelled, pa.int64())).to_pylist() if len(labelled) else []
    for index, row in zip(labelled.tolist(), rows, strict=True):
        label, evs = decided[row["sample_id"]]
        keys: list[str] = []
        pair, agreed = _review(row, label, evs, keys)
        if agreed is not None:
            audited.append(agreed)
        for seq, key in enumerate(keys, start=1):
            counts[key] += 1
            first.setdefault(key, (index, seq))
        emitted.extend([pair, row] if pair is not None else [row])
        sizes[index] = 2 if pair is not None else 1
    counts = Counter({key: counts[key] for key in sorted(first, key=first.__getitem__)})
    table = _with_reviewed(routed, labelled, sizes, emitted)
    made = _pairs(table, counts) if pairs else []
    if made:
        table = pa.concat_tables([table, pa.Table.from_pylist(made, schema=SAMPLE_SCHEMA)])
    result = Curated(table, counts, audit_pairs=len(audited))
    result.audit_agreement = sum(audited) / len(audited) if audited else None
    _agreement(result, state, routed, accept_at)
    return result


# a review decision's reason -> the outcome the curated table counts it under
_OUTCOMES = {
    "human_accept": "accepted",
    "human_prefers_A": "accepted",
    "human_prefers_B": "accepted",
    "human_reject": "rejected",
    "human_tie": "rejected",
    "human_correction": "corrected",
}
DERIVED_PAIRS = ("auto_pair", "step_prefix_pair")  # provenance.method of the pairs curation derives


def summarize(table: pa.Table, events: pa.Table, accept_at: float = 7.0) -> Curated:
    """The figures of a whole curated ``table`` (review outcomes, pairs, agreement with the experts
    and between them) from its rows and the whole label log: what :func:`curate` reports, for a
    table that was curated piece by piece."""
    table = conform(table)
    state = replay(events)
    awaiting, waiting = review_masks(table)
    counts: Counter[str] = Counter()
    counts["awaiting"], counts["waiting"] = int(awaiting.sum()), int(waiting.sum())
    method = pc.struct_field(table.column("provenance"), "method").fill_null("")
    derived = pc.is_in(method, value_set=pa.array(DERIVED_PAIRS)).to_numpy(zero_copy_only=False)
    reasons = _last_reasons(table, REVIEW_STAGES)
    for reason, is_pair in zip(reasons, derived.tolist(), strict=True):
        if is_pair:
            counts[f"pair: {reason}"] += 1
        elif reason in _OUTCOMES:
            counts[_OUTCOMES[reason]] += 1
    result = Curated(table, Counter({k: v for k, v in counts.items() if v}))
    audited = []
    decided = state.decided()
    has_audit = _has_reason(table, AUDIT_REASON)
    for row in table.filter(pa.array(has_audit)).select(["sample_id", "decisions"]).to_pylist():
        auto = audited_verdict(row["decisions"])
        if auto is not None and row["sample_id"] in decided:
            audited.append(_agrees(auto, decided[row["sample_id"]][0]))
    result.audit_pairs = len(audited)
    result.audit_agreement = sum(audited) / len(audited) if audited else None
    _agreement(result, state, table, accept_at)
    return result


def _flat(table: pa.Table) -> tuple[pa.Array, pa.Array]:
    decisions = table.column("decisions").combine_chunks()
    return pc.list_flatten(decisions), pc.list_parent_indices(decisions)


def _last_reasons(table: pa.Table, stages: tuple[str, ...]) -> list[str | None]:
    """The reason of each row's last decision of ``stages`` (None: none)."""
    out: list[str | None] = [None] * table.num_rows
    flat, parents = _flat(table)
    if not len(flat):
        return out
    hit = pc.is_in(flat.field("stage"), value_set=pa.array(stages)).fill_null(False)
    rows = pc.filter(parents, hit).to_pylist()
    reasons = pc.filter(flat.field("reason"), hit).to_pylist()
    for row, reason in zip(rows, reasons, strict=True):
        out[row] = reason  # in order: the last one stays
    return out


def _has_reason(table: pa.Table, reason: str) -> np.ndarray[Any, Any]:
    flat, parents = _flat(table)
    mask = np.zeros(table.num_rows, dtype=bool)
    if len(flat):
        hit = pc.equal(flat.field("reason"), reason).fill_null(False)
        mask[pc.filter(parents, hit).to_numpy(zero_copy_only=False)] = True
    return mask


def _with_reviewed(
    routed: pa.Table,
    labelled: np.ndarray[Any, Any],
    sizes: np.ndarray[Any, Any],
    emitted: list[dict[str, Any]],
) -> pa.Table:
    """``routed`` with each labelled row replaced by what its review emitted (``sizes`` rows each)."""
    if not emitted:
        return routed
    n = routed.num_rows
    ends = np.cumsum(sizes)
    take = np.empty(int(ends[-1]), dtype=np.int64)
    others = np.ones(n, dtype=bool)
    others[labelled] = False
    take[ends[others] - 1] = np.flatnonzero(others)
    slots = np.concatenate([np.arange(ends[i] - sizes[i], ends[i]) for i in labelled.tolist()])
    take[slots] = n + np.arange(len(emitted), dtype=np.int64)
    reviewed = pa.Table.from_pylist(emitted, schema=SAMPLE_SCHEMA)
    return pa.concat_tables([routed, reviewed]).take(pa.array(take))


def _pairs(table: pa.Table, counts: Counter[str]) -> list[dict[str, Any]]:
    """The machine-vouched pairs (pass over fail) and the trajectory prefix pairs of the curated
    rows, each sample_id once: only the rows a pair can come from are read as dicts."""
    made = [
        *auto_pairs(table.filter(pa.array(pair_sources(table))).to_pylist()),
        *prefix_pairs(table.filter(pa.array(prefix_sources(table))).to_pylist()),
    ]
    if not made:
        return []
    present = set(table.column("sample_id").to_pylist())
    out = []
    for pair in made:
        if pair["sample_id"] not in present:
            present.add(pair["sample_id"])
            out.append(pair)
            counts[f"pair: {pair['decisions'][-1]['reason']}"] += 1
    return out


def _pair_row(
    row: dict[str, Any], corrected: list[dict[str, str]], original: str, trail: list[dict[str, Any]], who: str
) -> dict[str, Any]:
    """The corrected response preferred over the original: a DPO pair the expert wrote."""
    decision = {
        "stage": STAGE,
        "verdict": "accept",
        "reason": "human_correction_pair",
        "detail": f"from {row['sample_id']} by {who}",
    }
    return preference_row(
        {**row, "messages": corrected},
        [corrected[-1]],
        [{"role": "assistant", "content": original}],
        [*trail[:-1], decision],
    )


def _agreement(result: Curated, state: LabelState, routed: pa.Table, accept_at: float) -> None:
    verdict_code = {"accept": 1.0, "reject": 0.0}
    matrix: list[list[float]] = []
    annotators = sorted({a for per in state.per_annotator.values() for a in per})
    for per in state.per_annotator.values():
        for annotator, (label, _) in per.items():
            if label.verdict:
                result.per_annotator[f"{annotator}: {label.verdict}"] += 1
        votes = {a: verdict_code[lab.verdict] for a, (lab, _) in per.items() if lab.verdict in verdict_code}
        if len(votes) >= 2:
            result.multi_annotated += 1
            matrix.append([votes.get(a, float("nan")) for a in annotators])
    if len(matrix) >= 2:
        result.inter_annotator_alpha = _nominal_alpha(np.array(matrix, dtype=float).T)
    decided = state.decided()
    # the judge mean of each labelled sample
    ids = pa.array(list(decided), pa.string())
    labelled = routed.filter(pc.is_in(routed.column("sample_id"), value_set=ids))
    mean_of = pc.struct_field(labelled.column("scores"), "judge_mean").to_pylist()
    means = dict(zip(labelled.column("sample_id").to_pylist(), mean_of, strict=True))
    agree = total = 0
    for sid, (label, _) in decided.items():
        mean = means.get(sid)
        if mean is None or label.verdict not in verdict_code or label.preference:
            continue
        total += 1
        agree += int((mean >= accept_at) == (label.verdict == "accept"))
    result.judge_human_pairs = total
    result.judge_human_agreement = agree / total if total else None


def _nominal_alpha(matrix: np.ndarray[Any, Any]) -> float | None:
    """Krippendorff's alpha (nominal) over annotators × samples; None when undefined."""
    import krippendorff

    values = matrix[~np.isnan(matrix)]
    if values.size == 0 or np.all(values == values[0]):
        return (
            1.0 if values.size else None
        )  # everyone agreed on one value: alpha is undefined, agreement total
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))
