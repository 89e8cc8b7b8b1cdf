"""``judge_calibration``: the judges' expert calibration, where the panel reads it.

After every curation (the factory run and the curation job the label sensor starts), each judge is
fitted on the curated rows experts decided (annotators/judges/calibration.py: weighted AUC, cut,
centre, weight, selection-corrected), and the fit is written to the calibration store under the
state dir (``<state dir>/calibration/judges.json``), keyed by the judge's **identity** (model,
revision, engine and compute type, scoring method, prompt hash). The next batch's panel reads its
weights, cuts and centres from there (annotators/judges/panel.py), beside the AUC each earlier batch
measured against the verifiers (``judged_samples``, assets/judging_report.py).

Not the latest published manifest: a retraction or a new version does not change how the next
batch is judged (the manifest keeps the agreement report as history). A judge whose identity
changed since its labels were cast gets no fit (a reset: it starts from nothing, weight 0 until it
earns one); fewer than ``judging.calibration_min_labels`` labels write nothing.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pyarrow as pa

from ptfactory.annotators.judges.calibration import STATS_KEY, Calibration, calibrate, store_calibration
from ptfactory.assets.resources.panel import PanelResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.config import FactoryConfig

__all__ = ["STATS_KEY", "judge_calibration", "version_calibration", "version_calibration_metadata"]


def _fitted(curated: pa.Table, config: FactoryConfig) -> Calibration:
    """Every curated row an expert decided (rejects are labels too, though never published)."""
    routing = config.routing
    labels = config.judging.calibration_min_labels
    return calibrate(curated, labels, routing.accept_at, audit_rate=routing.audit_rate or None)


def version_calibration(curated: pa.Table, config: FactoryConfig) -> dict[str, Any]:
    """The agreement report an SFT version's manifest keeps (history: no panel reads it back)."""
    return _fitted(curated, config).to_stats()


def _calibration_md(calibration: Calibration) -> dg.MetadataValue:
    """Per judge: votes on labelled rows, accuracy and kappa against the experts, fitted weight."""

    def num(value: float | None) -> str:
        return f"{value:.3f}" if value is not None else "n/a"

    lines = ["| judge | votes | accuracy | kappa | weight |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['judge']} | {r['votes']} | {num(r['accuracy'])} | {num(r['kappa'])} | {num(r['weight'])} |"
        for r in calibration.rows()
    ]
    lines.append(
        f"| **panel** (mean ≥ {calibration.accept_at:g}) | {calibration.labels} | "
        f"{num(calibration.panel_accuracy)} | {num(calibration.panel_kappa)} | |"
    )
    if calibration.audit is not None:
        audit = calibration.audit
        lines.append(
            f"| **panel, audit rows** | {audit.rows} | {num(audit.panel_accuracy)} | {num(audit.panel_kappa)} | |"
        )
    if calibration.weights is None:
        lines.append(
            f"\nNo expert fit until {calibration.min_labels} labels ({calibration.labels} so far): judges "
            "weigh by their AUC against the verifiers on each batch, or their identity's persisted weight."
        )
    return dg.MetadataValue.md("\n".join(lines))


def version_calibration_metadata(stats: dict[str, object]) -> dict[str, dg.MetadataValue]:
    """A version's judge-agreement report (what the experts said of the judges when it was made)."""
    body = stats.get(STATS_KEY)
    if not isinstance(body, dict):
        return {}
    calibration = Calibration.from_stats(body)
    metadata = {
        "calibration_labels": dg.MetadataValue.int(calibration.labels),
        "calibration": _calibration_md(calibration),
        "calibration_weights": dg.MetadataValue.json(calibration.weights or {}),
    }
    if calibration.panel_accuracy is not None:
        metadata["calibration_panel_accuracy"] = dg.MetadataValue.float(calibration.panel_accuracy)
    if calibration.panel_kappa is not None:
        metadata["calibration_panel_kappa"] = dg.MetadataValue.float(calibration.panel_kappa)
    return metadata


@dg.asset(group_name="review", kinds={"json"})
def judge_calibration(
    settings: SettingsResource, panel: PanelResource, curated_samples: pa.Table
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Each judge fitted on the experts' labels of every curated row, written to the calibration
    store by judge identity (what the next batch's panel weights, cuts and centres come from)."""
    fitted = _fitted(curated_samples, settings.config)
    built = panel.panel()
    identities = built.identities()
    written = store_calibration(fitted, built.store, identities) if built.store is not None else []
    resets = built.store.resets({n: key for n, (key, _) in identities.items()}) if built.store else {}
    rows = fitted.rows()
    lines = ["| judge | votes | AUC | cut | centre | weight | stored |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        shown = [r["auc"], r["cut"], r["centre"], r["weight"]]
        cells = " | ".join("n/a" if v is None else f"{v:.3g}" for v in shown)
        lines.append(
            f"| {r['judge']} | {r['votes']} | {cells} | {'yes' if r['judge'] in written else 'no'} |"
        )
    return dg.MaterializeResult(
        metadata={
            "labels": dg.MetadataValue.int(fitted.labels),
            "min_labels": dg.MetadataValue.int(fitted.min_labels),
            "fitted": dg.MetadataValue.bool(fitted.weights is not None),
            "stored": dg.MetadataValue.text(", ".join(written) or "none"),
            "weights": dg.MetadataValue.json(
                {j: w for j, w in (fitted.weights or {}).items() if j in written}
            ),
            "judge_identity_resets": dg.MetadataValue.text(", ".join(sorted(resets)) or "none"),
            "fits": dg.MetadataValue.md("\n".join(lines) if rows else "no labelled rows with a judge vote"),
            "store": dg.MetadataValue.path(str(built.store.path) if built.store is not None else ""),
        }
    )
