"""A Label Studio annotation's ``result`` → what the expert decided. Pure functions."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

__all__ = ["Label", "combine", "parse_result"]


@dataclass(frozen=True)
class Label:
    verdict: str | None  # accept | reject | skipped | None (nothing chosen)
    rating: int | None = None
    corrected: str | None = None
    preference: str | None = None  # A | B | tie
    reason: str | None = None
    first_error: int | None = None  # a trajectory's first wrong step (its index); -1: none was wrong


def _text(value: dict[str, Any]) -> str | None:
    text = value.get("text")
    if isinstance(text, list):
        text = "\n".join(str(t) for t in text)
    text = str(text).strip() if text is not None else ""
    return text or None


def parse_result(result: list[dict[str, Any]] | str | None, was_cancelled: bool = False) -> Label:
    """Read the controls our labeling configs define; anything else is ignored, never fatal."""
    if was_cancelled:
        return Label("skipped")
    if isinstance(result, str):
        try:
            result = json.loads(result)
        except ValueError:
            result = []
    fields: dict[str, Any] = {}
    for item in result or []:
        if not isinstance(item, dict):
            continue
        name, value = item.get("from_name"), item.get("value") or {}
        if name in ("verdict", "preference") and value.get("choices"):
            fields[name] = str(value["choices"][0])
        elif name == "rating" and value.get("rating") is not None:
            fields["rating"] = int(value["rating"])
        elif name in ("corrected", "reason"):
            fields[name] = _text(value)
        elif name == "first_error" and value.get("choices"):
            fields[name] = _step(str(value["choices"][0]))
    preference = fields.get("preference")
    verdict = fields.get("verdict")
    if preference is not None and verdict is None:
        verdict = "reject" if preference == "tie" else "accept"
    return Label(
        verdict=verdict,
        rating=fields.get("rating"),
        corrected=fields.get("corrected"),
        preference=preference,
        reason=fields.get("reason"),
        first_error=fields.get("first_error"),
    )


def _step(choice: str) -> int | None:
    """The first_error choice's alias: a step index, or ``none`` (-1: every step was right)."""
    if choice == "none":
        return -1
    return int(choice) if choice.isdigit() else None


def combine(labels: list[Label]) -> Label | None:
    """One decision from several annotators: the majority of those who chose; a tie decides nothing.

    Skips do not vote. A corrected response is taken from an accepting annotator (the latest
    given, i.e. last in ``labels``).
    """
    voting = [label for label in labels if label.verdict in ("accept", "reject")]
    if not voting:
        return None
    marked = [label.first_error for label in voting if label.first_error is not None]
    # the step most annotators marked; a tie: the earliest wrong step (-1, none wrong, ranks last)
    first_error = (
        min(Counter(marked).most_common(), key=lambda kv: (-kv[1], kv[0] if kv[0] >= 0 else 1 << 30))[0]
        if marked
        else None
    )
    if any(label.preference for label in voting):
        prefs = Counter(label.preference for label in voting if label.preference)
        (top, count), *rest = prefs.most_common()
        if rest and rest[0][1] == count:
            return None
        reasons = [label.reason for label in voting if label.preference == top and label.reason]
        return Label(
            "reject" if top == "tie" else "accept", preference=top, reason=reasons[-1] if reasons else None
        )
    verdicts = Counter(label.verdict for label in voting)
    if verdicts["accept"] == verdicts["reject"]:
        return None
    verdict = "accept" if verdicts["accept"] > verdicts["reject"] else "reject"
    ratings = [label.rating for label in voting if label.rating is not None]
    corrected = [label.corrected for label in voting if label.verdict == "accept" and label.corrected]
    return Label(
        verdict,
        rating=round(sum(ratings) / len(ratings)) if ratings else None,
        corrected=corrected[-1] if corrected and verdict == "accept" else None,
        first_error=first_error,
    )
