"""``panel_probe`` on ``judged_samples``: the judge probe (``ptf judge-probe``) as an asset check.

The probe tries to fool the configured panel (grader-override text on a wrong answer, a restated
prompt, padding, swapped A/B order, empty and unparseable replies, sandbox faults:
annotators/judges/probes.py). It runs once per **panel identity** (its judges' identities and the
calibration they read, its verifiers, the routing lines) and is kept under
``<state dir>/probes/<identity>.json``, the file ``ptf judge-probe`` writes too: a later batch under
the same panel reads the report instead of probing again, and a changed judge, engine, rubric,
calibration fit or accept line probes afresh.

The check fails (severity ERROR) when the probe fails: override text lifted a wrong answer over the
accept line, a sandbox fault became a student's failure, or a fault the solution caused was not its
failure. It does not block the batch (the verifiers still decide the rows they cover); the probe's
table is in the check's metadata. ``judging.probe: false`` turns it off.
"""

from __future__ import annotations

import dagster as dg

from ptfactory.annotators.judges.probes import cached_probe
from ptfactory.assets.judging import judged_samples
from ptfactory.assets.pools import GPU_POOL
from ptfactory.assets.resources.panel import PanelResource
from ptfactory.assets.resources.settings import SettingsResource

__all__ = ["PROBE_CHECK", "judged_samples_panel_probe"]

PROBE_CHECK = "panel_probe"  # its step: judged_samples_panel_probe


@dg.asset_check(
    asset=judged_samples,
    name=PROBE_CHECK,
    pool=GPU_POOL,
    description=(
        "the judge probe (ptf judge-probe) against this batch's panel, once per panel identity "
        "(cached under the state dir): fails when override text lifts a wrong answer over the "
        "accept line or a sandbox fault is misjudged"
    ),
)
def judged_samples_panel_probe(settings: SettingsResource, panel: PanelResource) -> dg.AssetCheckResult:
    config = settings.config
    if not config.judging.probe:
        return dg.AssetCheckResult(passed=True, metadata={"status": "off: judging.probe is false"})
    built = panel.panel()
    report, cached = cached_probe(built, config.routing, settings.state_dir)
    failed = [r for r in report.results if r.failed]
    return dg.AssetCheckResult(
        passed=report.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            "no probe fooled the panel"
            if report.passed
            else "the panel was fooled: " + "; ".join(report.failures)
        ),
        metadata={
            "panel_identity": dg.MetadataValue.text(report.identity),
            "cached": dg.MetadataValue.bool(cached),
            "seed": dg.MetadataValue.int(report.seed),
            "failures": dg.MetadataValue.text("; ".join(report.failures) or "none"),
            "failed_probes": dg.MetadataValue.text(
                ", ".join(f"{r.probe}/{r.member}" for r in failed) or "none"
            ),
            "probe_table": dg.MetadataValue.md(f"```\n{report.table()}\n```"),
            "report": dg.MetadataValue.path(str(settings.state_dir / "probes" / f"{report.identity}.json")),
        },
    )
