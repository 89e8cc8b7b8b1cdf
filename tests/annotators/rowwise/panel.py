"""Reference implementations of the panel's rules, written from issue 37's text, not from the
production code: short, one row at a time, slow, and obviously what the issue says.

- :func:`aggregate_row`: a row's mean, median, spread, confidence and independent votes from its
  recorded votes, given each member's weight on the batch, whether it is in the batch (not left
  out, not constant) and whether it is unmeasured.
- :func:`pairs`: each instruction's best answer no verifier failed over its worst, unless a
  generator's sample would be chosen over a verified or human-written row.
- :func:`means_by_drop_reason`: the judge mean per difficulty drop reason, and for kept rows.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import pyarrow as pa


def aggregate_row(  # noqa: PLR0917 - the rule's inputs, named as the issue names them
    votes: list[dict[str, Any]],
    members: list[str],
    weight: Mapping[str, float],
    in_batch: set[str],
    unmeasured: set[str],
    key: Mapping[str, str],
) -> dict[str, Any]:
    """``votes``: a row's votes, the i-th cast by ``members[i]`` (whatever name a vote carries).
    Votes count when parsed with a score from a member in the batch; the weighted ones (weight
    > 0) make a weighted mean; with none, the unmeasured judges' counted votes make an equal mean;
    ``judge_votes``: distinct independence keys among the weighted votes."""
    cast = list(zip(members, votes, strict=True))
    counted = [(m, v) for m, v in cast if v["parsed"] and v["score"] is not None and m in in_batch]
    weighted = [(m, v) for m, v in counted if weight[m] > 0]
    use = weighted or [(m, v) for m, v in counted if m in unmeasured]
    if not use:
        return {"judge_mean": None, "judge_median": None, "judge_spread": None, "judge_confidence": None,
                "judge_votes": 0}  # fmt: skip
    w = [weight[m] if weighted else 1.0 for m, _ in use]
    use_votes = [v for _, v in use]
    scores = [float(v["score"]) for v in use_votes]
    stated = [v["confidence"] for v in use_votes if v["confidence"] is not None]
    return {
        "judge_mean": round(sum(s * x for s, x in zip(scores, w, strict=True)) / sum(w), 4),
        "judge_median": round(statistics.median(scores), 4),
        "judge_spread": round(max(scores) - min(scores), 4),
        "judge_confidence": round(sum(stated) / len(stated), 4) if stated else None,
        "judge_votes": len({key[m] for m, _ in weighted}),
    }


def _failed(row: dict[str, Any]) -> bool:
    return any(v["verdict"] == "fail" for v in (row["scores"] or {}).get("verifiers") or [])


def _trusted(row: dict[str, Any]) -> bool:
    """A verifier passed it (and none failed it), or no model wrote it."""
    said = {v["verdict"] for v in (row["scores"] or {}).get("verifiers") or []}
    return ("pass" in said and "fail" not in said) or not (row["provenance"] or {}).get("model")


def _dropped(row: dict[str, Any]) -> bool:
    return any(d["verdict"] in ("drop", "reject") for d in row["decisions"] or [])


def pairs(table: pa.Table, margin: float) -> list[tuple[int, int]]:
    """(chosen, rejected) row indices, instructions in the order of their first answer."""
    rows = table.to_pylist()
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        parent = (row["provenance"] or {}).get("parent_id")
        mean = (row["scores"] or {}).get("judge_mean")
        if row["kind"] == "sft" and not _dropped(row) and mean is not None and parent:
            groups.setdefault(parent, []).append(i)
    out = []
    for members in groups.values():

        def rank(i: int) -> tuple[float, str, int]:
            return (rows[i]["scores"]["judge_mean"], rows[i]["sample_id"], i)

        fit = [i for i in members if not _failed(rows[i])]
        if len(members) < 2 or not fit:
            continue
        best, worst = max(fit, key=rank), min(members, key=rank)
        gap = rank(best)[0] - rank(worst)[0]
        if best == worst or gap <= 0 or gap < margin:
            continue
        if _trusted(rows[worst]) and not _trusted(rows[best]):
            continue  # a generator's sample never over a verified or human-written row
        out.append((best, worst))
    return out


def means_by_drop_reason(table: pa.Table, stage: str = "difficulty") -> dict[str, tuple[int, float | None]]:
    """Rows dropped by ``stage`` and no other, keyed by the reason of their first ``stage`` drop,
    and live rows as ``kept``: (rows, mean judge mean over those with one)."""
    groups: dict[str, list[float | None]] = {}
    for row in table.to_pylist():
        drops = [d for d in row["decisions"] or [] if d["verdict"] in ("drop", "reject")]
        mean = (row["scores"] or {}).get("judge_mean")
        if not drops:
            groups.setdefault("kept", []).append(mean)
        elif all(d["stage"] == stage for d in drops):
            reason = next(
                d["reason"] for d in row["decisions"] if d["stage"] == stage and d["verdict"] == "drop"
            )
            groups.setdefault(reason, []).append(mean)
    out: dict[str, tuple[int, float | None]] = {}
    for name, values in sorted(groups.items()):
        scored = [v for v in values if v is not None]
        out[name] = (len(values), round(statistics.fmean(scored), 4) if scored else None)
    return out
