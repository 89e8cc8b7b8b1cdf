"""Dagster resources, one per concern; each asset declares only the ones it uses.

======================  ===============================================================  =========
resource key            what it gives                                                    nests
======================  ===============================================================  =========
``settings``            the factory.yaml a run acts under (a batch's recorded one) and    —
                        the stores under PTF_HOME (datasets, seeds, assets, the review
                        queue, the published-sample index): :mod:`.settings`
``engines``             LLM engines, built lazily per spec and closed after the run       settings
``panel``               the judge panel, on the engines (shared weights)                  engines
``scale``               the Ray cluster of ``scale.ray``, if set                          settings
``sandbox``             sandbox pools under ``sandbox`` limits (every node's with Ray)    scale
``label_studio``        server, clients, label ledger; the one pusher and the pull        settings
``samples_io``          stage outputs as Parquet (:mod:`.io`)                             —
======================  ===============================================================  =========

:func:`factory_resources` wires them: a resource nested in another is the same instance as the
top-level one (Dagster partial resources), so a judge on the generator's model shares its weights
and one ``settings`` decides for the whole run. import-linter keeps them apart (pyproject.toml).
"""

from __future__ import annotations

from typing import Any

from ptfactory.assets.resources.engines import EnginesResource
from ptfactory.assets.resources.io import SampleIOManager
from ptfactory.assets.resources.labelstudio import LabelStudioResource
from ptfactory.assets.resources.panel import PanelResource
from ptfactory.assets.resources.sandbox import SandboxResource
from ptfactory.assets.resources.scale import ScaleResource
from ptfactory.assets.resources.settings import SettingsResource

__all__ = [
    "EnginesResource",
    "LabelStudioResource",
    "PanelResource",
    "SampleIOManager",
    "SandboxResource",
    "ScaleResource",
    "SettingsResource",
    "factory_resources",
]


def factory_resources(
    config_path: str = "factory.yaml", home: str = "", *, batch_configs: bool = True
) -> dict[str, Any]:
    """Every resource the assets, sensors and schedules declare, wired over one ``settings``.

    ``config_path``: the factory.yaml used where no batch recorded one; ``home``: PTF_HOME (empty:
    the environment's); ``batch_configs``: runs act under their batches' recorded configs
    (``SettingsResource``)."""
    settings = SettingsResource.configure_at_launch(
        config_path=config_path, home=home, batch_configs=batch_configs
    )
    engines = EnginesResource.configure_at_launch(settings=settings)
    scale = ScaleResource.configure_at_launch(settings=settings)
    return {
        "settings": settings,
        "engines": engines,
        "panel": PanelResource(engines=engines),
        "scale": scale,
        "sandbox": SandboxResource(scale=scale),
        "label_studio": LabelStudioResource(settings=settings),
        "samples_io": SampleIOManager(home=home),
    }
