"""annotators/curation.py's ``curate`` before it worked on Arrow columns (verbatim)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa

from ptfactory.annotators.curation import (
    Curated,
    LabelState,
    _agrees,
    _annotation,
    _last_assistant,
    _nominal_alpha,
    replay,
)
from ptfactory.annotators.pairs import auto_pairs, preference_row
from ptfactory.annotators.trajectory_review import prefix_pairs, step_labels
from ptfactory.storage.schema import SAMPLE_SCHEMA, audited_verdict, awaiting_review, conform, is_waiting

STAGE = "review"


def curate(routed: pa.Table, events: pa.Table, accept_at: float = 7.0, pairs: bool = True) -> Curated:
    state = replay(events)
    decided = state.decided()
    routed = conform(routed)
    out_rows: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    audited: list[bool] = []
    for row in routed.to_pylist():
        trail = list(row["decisions"] or [])
        sid = row["sample_id"]
        if not awaiting_review(trail) or sid not in decided:
            if awaiting_review(trail):
                counts["awaiting"] += 1
            elif is_waiting(trail):
                counts["waiting"] += 1
            out_rows.append(row)
            continue
        label, evs = decided[sid]
        auto = audited_verdict(trail)
        if auto is not None:
            audited.append(_agrees(auto, label))
        who = ", ".join(sorted({e["annotator"] or "?" for e in evs}))
        if row.get("steps") and label.first_error is not None:
            row["step_labels"] = step_labels(len(row["steps"]), label.first_error, who)
            counts["step_labelled"] += 1
        if label.preference:  # an A/B choice; a verdict on a pair (accept/reject) follows below
            if label.preference == "tie":
                trail.append(
                    {"stage": STAGE, "verdict": "reject", "reason": "human_tie", "detail": f"by {who}"}
                )
                counts["rejected"] += 1
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
                counts["accepted"] += 1
            row["annotation"] = _annotation(label, evs, None)
        elif label.verdict == "reject":
            trail.append(
                {"stage": STAGE, "verdict": "reject", "reason": "human_reject", "detail": f"by {who}"}
            )
            row["annotation"] = _annotation(label, evs, None)
            counts["rejected"] += 1
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
                trail.append(
                    {"stage": STAGE, "verdict": "edit", "reason": "human_correction", "detail": detail}
                )
                out_rows.append(_pair_row(row, messages, original or "", trail, who))
                counts["corrected"] += 1
            else:
                trail.append(
                    {"stage": STAGE, "verdict": "accept", "reason": "human_accept", "detail": f"by {who}"}
                )
                counts["accepted"] += 1
            row["annotation"] = _annotation(label, evs, original)
        row["decisions"] = trail
        out_rows.append(row)
    if pairs:
        present = {r["sample_id"] for r in out_rows}
        for pair in [*auto_pairs(out_rows), *prefix_pairs(out_rows)]:
            if pair["sample_id"] not in present:
                present.add(pair["sample_id"])
                out_rows.append(pair)
                counts[f"pair: {pair['decisions'][-1]['reason']}"] += 1
    table = pa.Table.from_pylist(out_rows, schema=SAMPLE_SCHEMA) if out_rows else conform(routed)
    result = Curated(table, counts, audit_pairs=len(audited))
    result.audit_agreement = sum(audited) / len(audited) if audited else None
    _agreement(result, state, routed, accept_at)
    return result


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
    means = {
        r["sample_id"]: (r["scores"] or {}).get("judge_mean")
        for r in routed.select(["sample_id", "scores"]).to_pylist()
    }
    agree = total = 0
    for sid, (label, _) in state.decided().items():
        mean = means.get(sid)
        if mean is None or label.verdict not in verdict_code or label.preference:
            continue
        total += 1
        agree += int((mean >= accept_at) == (label.verdict == "accept"))
    result.judge_human_pairs = total
    result.judge_human_agreement = agree / total if total else None
