"""What the panel learned about itself on one batch: counted shares, who left the mean, each
judge's batch weight, the verifiers' verdicts, self-abstentions and the self-preference warning,
and Krippendorff's alpha over the judges that carry information."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptfactory.annotators.judges.weights import JudgeWeight, weights_summary

__all__ = ["PanelReport", "krippendorff_alpha", "self_preference_warning"]


def self_preference_warning(
    judge_families: dict[str, str | None], generator_families: set[str]
) -> str | None:
    """A warning when ANY judge shares a generator's family (it abstains on those rows, so the rows
    lose its vote; a panel without another family then decides them with fewer votes), else None."""
    shared = sorted(f"{j} ({f})" for j, f in judge_families.items() if f and f in generator_families)
    if not shared:
        return None
    return (
        f"judge(s) of a generator's family: {', '.join(shared)}; a model rates its own family's outputs "
        "higher (self-preference), so they abstain on those rows; add judges of other families to "
        "factory.yaml `judges`"
    )


@dataclass
class PanelReport:
    """What the panel learned about itself on one batch."""

    alpha: float | None = None
    counted_share: dict[str, float | None] = field(default_factory=dict)  # per judge
    left_out: list[str] = field(default_factory=list)  # under min_counted_share: not in the aggregate
    constant: list[str] = field(default_factory=list)  # (near-)constant: no information, out of the mean
    weights: dict[str, JudgeWeight] = field(default_factory=dict)  # per judge: its weight on the batch
    verdicts: dict[str, Counter[str]] = field(default_factory=dict)  # per verifier: verdict -> rows
    labelled: tuple[int, int] = (0, 0)  # generated rows a verifier passed / failed
    self_abstained: dict[str, int] = field(default_factory=dict)  # per judge: rows its family wrote
    self_preference: str | None = None
    resets: dict[str, str] = field(default_factory=dict)  # judges whose identity changed: old key
    sampled_out: int = 0  # verifier-decided rows beyond the judges' sample (not shown to judges)
    flagged_out: dict[str, int] = field(default_factory=dict)  # per judge: rows not asked once flagged

    @property
    def flagged(self) -> list[str]:
        """Judges measured below the AUC floor on this batch (weight 0)."""
        return [name for name, w in self.weights.items() if w.flagged]

    def weights_line(self) -> str:
        return weights_summary(self.weights)

    def verdicts_line(self) -> str:
        return (
            "; ".join(
                f"{name}: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
                for name, counts in self.verdicts.items()
                if counts
            )
            or "no verifier applied"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "counted_share": self.counted_share,
            "left_out": self.left_out,
            "constant": self.constant,
            "weights": {k: w.to_dict() for k, w in self.weights.items()},
            "verdicts": {k: dict(v) for k, v in self.verdicts.items()},
            "labelled": list(self.labelled),
            "self_abstained": self.self_abstained,
            "self_preference": self.self_preference,
            "resets": self.resets,
            "sampled_out": self.sampled_out,
            "flagged_out": self.flagged_out,
        }


def krippendorff_alpha(matrix: np.ndarray) -> float | None:
    """Interval alpha over a judges × rows matrix (NaN where a judge gave no counted score).

    In closed form, O(judges × rows): the squared differences of all pairs of values within a
    row, and over all pairable values, come from sums and sums of squares. The ``krippendorff``
    package builds a rows × values × values array, and LLM scores are continuous: at 5,000 rows
    of likelihood votes that is tens of GiB. Same value as the package (tested against it).
    """
    usable = matrix[:, np.sum(~np.isnan(matrix), axis=0) >= 2]
    if usable.shape[0] < 2 or usable.shape[1] < 2 or np.nanvar(usable) == 0:
        return None
    present = ~np.isnan(usable)
    values = np.where(present, usable, 0.0)
    m = present.sum(axis=0).astype(np.float64)  # pairable values per row
    s1, s2 = values.sum(axis=0), (values * values).sum(axis=0)
    n = float(m.sum())
    # sum over ordered pairs i != j of (v_i - v_j)^2 = 2 (m * sum v^2 - (sum v)^2)
    observed = float(np.sum(2 * (m * s2 - s1 * s1) / (m - 1))) / n
    expected = 2 * (n * float(s2.sum()) - float(s1.sum()) ** 2) / (n * (n - 1))
    return 1.0 - observed / expected if expected > 0 else None
