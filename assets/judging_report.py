"""What ``judged_samples`` says about its panel on the batch, and what it keeps of it.

- The verifiers' verdicts (pass / fail / partial / no_answer / abstain per verifier) and each
  judge's **batch weight** (its AUC against the verifiers on the batch's generator-produced rows,
  with its interval; the persisted weight of its identity when the batch has under 5 labels of a
  class; 0 and flagged under 0.55): the asset's metadata, under the keys the run summary reads
  (``verifier_verdicts``, ``judge_weights``; pipelines/summary.py).
- The measurements are kept in the calibration store under the judge's identity
  (:meth:`CalibrationStore.record_batch`; a rerun of the batch replaces its own), so a later batch
  without enough labels of its own starts from what this one measured, never from a manifest.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from ptfactory.annotators.judges import Panel, PanelReport
from ptfactory.annotators.judges.weights import MIN_AUC

__all__ = ["keep_measurements", "report_metadata"]


def _weights_md(report: PanelReport) -> dg.MetadataValue:
    lines = [
        "| judge | weight | source | AUC [95% CI] | labels +/- | note |",
        "|---|---|---|---|---|---|",
    ]
    for name, w in report.weights.items():
        interval = f" [{w.low:.2f}, {w.high:.2f}]" if w.low is not None and w.high is not None else ""
        note = [f"flagged: AUC under {MIN_AUC}" if w.flagged else "", "constant" if w.constant else ""]
        note.append("left out" if w.left_out else "")
        auc = f"{w.auc:.2f}{interval}" if w.auc is not None else "n/a"
        lines.append(
            f"| {name} | {w.weight:g} | {w.source} | {auc} | {w.positives}/{w.negatives} | "
            f"{'; '.join(n for n in note if n)} |"
        )
    return dg.MetadataValue.md("\n".join(lines))


def _verdicts_md(report: PanelReport) -> dg.MetadataValue:
    kinds = sorted({k for counts in report.verdicts.values() for k in counts})
    lines = ["| verifier | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    for name, counts in report.verdicts.items():
        lines.append(f"| {name} | " + " | ".join(str(counts.get(k, 0)) for k in kinds) + " |")
    return dg.MetadataValue.md("\n".join(lines) if kinds else "no verifier applied")


def report_metadata(report: PanelReport, recorded: int) -> dict[str, dg.MetadataValue]:
    """The batch's verifier verdicts and judge weights (tables, and JSON for the run summary)."""
    weights: dict[str, Any] = {name: w.to_dict() for name, w in report.weights.items()}
    return {
        "verifier_verdicts": dg.MetadataValue.json({k: dict(v) for k, v in report.verdicts.items()}),
        "verifiers": _verdicts_md(report),
        "judge_weights": dg.MetadataValue.json(weights),
        "judge_weights_table": _weights_md(report),
        "judges_flagged": dg.MetadataValue.text(", ".join(report.flagged) or "none"),
        # generator-produced rows a verifier passed / failed: what the weights were measured on
        "verifier_labelled_rows": dg.MetadataValue.text(f"{report.labelled[0]}+/{report.labelled[1]}-"),
        "self_abstained": dg.MetadataValue.json(report.self_abstained),
        # per judge: rows it was not asked about once the batch's verified rows flagged it
        "flagged_out": dg.MetadataValue.json(report.flagged_out),
        "judge_identity_resets": dg.MetadataValue.text(", ".join(sorted(report.resets)) or "none"),
        "calibration_batches_recorded": dg.MetadataValue.int(recorded),
    }


def keep_measurements(panel: Panel, report: PanelReport, batch: str) -> int:
    """Keep the batch's measured weights in the panel's calibration store under each judge's
    identity, and note the identities (a later change shows as a reset); returns how many judges'
    measurements were kept (those with at least 5 labels of each class)."""
    if panel.store is None:
        return 0
    identities = panel.identities()
    recorded = panel.store.record_batch(batch, report.weights, identities)
    panel.store.remember(identities)
    return recorded
