"""The table `ptf run` ends with: rows per stage, drops per reason, tokens, estimated cost, wall time;
and what the panel did on the batch: each verifier's verdicts and each judge's batch weight."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ptfactory.annotators.judges.weights import MIN_AUC  # under it: weight 0 for the batch, flagged

__all__ = ["StageLine", "drop_reasons", "judge_weight_lines", "stage_lines", "verifier_lines"]

# the graph's order; assets a run did not materialize are left out
STAGES = (
    "agent_tasks",
    "agent_trajectories",
    "seed_tasks",
    "candidate_instructions",
    "candidate_responses",
    "deduplicated_samples",
    "decontaminated_samples",
    "execution_validated",
    "difficulty_scored",
    "judged_samples",
    "routed_samples",
    "human_labels",
    "curated_samples",
    "sft_dataset",
    "preference_dataset",
    "rl_dataset",
)


@dataclass
class StageLine:
    asset: str
    rows: int | None
    tokens: int
    cost_usd: float
    seconds: float | None


def stage_lines(
    materializations: dict[str, dict[str, Any]], step_seconds: dict[str, float]
) -> list[StageLine]:
    lines = []
    for asset in STAGES:
        meta = materializations.get(asset)
        if meta is None:
            continue
        rows = meta.get("dagster/row_count")
        lines.append(
            StageLine(
                asset,
                int(rows) if rows is not None else None,
                int(meta.get("prompt_tokens", 0) or 0) + int(meta.get("completion_tokens", 0) or 0),
                float(meta.get("estimated_cost_usd", 0.0) or 0.0),
                step_seconds.get(asset),
            )
        )
    # steps that are no stage of the graph (an asset check such as the judge probe) still took time
    shown = {line.asset for line in lines}
    lines += [StageLine(step, None, 0, 0.0, s) for step, s in step_seconds.items() if step not in shown]
    return lines


def drop_reasons(table: pa.Table) -> Counter[str]:
    """``stage: reason`` → rows dropped there, over a stage output's decision trails."""
    counts: Counter[str] = Counter()
    for trail in table.column("decisions").to_pylist():
        for decision in trail or []:
            if decision["verdict"] in ("drop", "reject"):
                counts[f"{decision['stage']}: {decision['reason']}"] += 1
                break
    return counts


def verifier_lines(judged: dict[str, Any]) -> list[str]:
    """One line per verifier that applied to a row of the batch: its pass / fail / abstain counts
    (``judged_samples``' ``verifier_verdicts``)."""
    verdicts = judged.get("verifier_verdicts") or {}
    order = ("pass", "fail", "partial", "no_answer", "abstain")
    lines = []
    for name, counts in verdicts.items():
        if not counts:
            continue
        ranked = sorted(counts.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else 9, kv[0]))
        lines.append(f"{name}: " + ", ".join(f"{verdict} {n}" for verdict, n in ranked))
    return lines


def judge_weight_lines(judged: dict[str, Any]) -> list[str]:
    """One line per judge: its weight on the batch, where it came from (its AUC against the
    verifiers on the batch's generated rows, the persisted weight of its identity, or none), and a
    flag when the batch measured it under the AUC floor (``judged_samples``' ``judge_weights``)."""
    lines = []
    for name, w in (judged.get("judge_weights") or {}).items():
        said = f"{name}: weight {float(w['weight']):g} ({w['source']}"
        if w.get("auc") is not None:
            interval = f" [{w['low']:.2f}, {w['high']:.2f}]" if w.get("low") is not None else ""
            said += f", AUC {float(w['auc']):.2f}{interval} on {w['positives']}+/{w['negatives']}-"
        said += ")"
        if w.get("flagged"):
            said += f" FLAGGED: AUC under {MIN_AUC}, not counted on this batch"
        if w.get("constant"):
            said += "; constant on the batch: out of the mean"
        if w.get("left_out"):
            said += "; left out: too few counted votes"
        lines.append(said)
    return lines
