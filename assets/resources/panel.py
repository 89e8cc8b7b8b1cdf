"""``PanelResource``: the judges of factory.yaml ``judges``, built on the run's engines."""

import dagster as dg

from ptfactory.annotators.judges import Panel
from ptfactory.assets.resources.engines import EnginesResource
from ptfactory.engines.base import Engine
from ptfactory.engines.spec import EngineSpec, resolved_backend
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.select import open_sandbox
from ptfactory.panel_config import build_panel

__all__ = ["REMOTE_BACKENDS", "PanelResource"]

# engines whose every call costs money or a remote server's time: what they never spend on rows that
# no judge can change (assets/judging.py, rows_to_judge)
REMOTE_BACKENDS = ("openai", "vllm")


class PanelResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The judge panel; its LLM judges run on the engines resource (a judge on the generator's model
    shares the generator's loaded weights)."""

    engines: EnginesResource

    def _specs(self) -> list[tuple[str, EngineSpec]]:
        """(judge name, engine spec) of every LLM judge."""
        config = self.engines.settings.config
        return [(j.name, j.engine or config.engines.generator) for j in config.judges if j.type == "llm"]

    def panel(self) -> Panel:
        """The panel of factory.yaml (panel_config.build_panel): verifiers first; persisted weights,
        cuts and centres from the calibration store under the state dir, keyed by judge identity.
        The verifiers open this machine's sandbox only when a batch needs it: an agent episode to
        replay (its final state's check re-run), a code row the execution stage did not run."""
        config = self.engines.settings
        cfg = config.config
        limits = cfg.sandbox

        def sandbox() -> Sandbox:
            return open_sandbox(limits, limits.workers, limits.backend)

        return build_panel(
            cfg.judges, cfg.judging, cfg.engines.generator, engine=self.engines.engine,
            sandbox=sandbox, limits=limits, store=config.state_dir,
        )  # fmt: skip

    def judge_engines(self) -> list[tuple[Engine, float]]:
        """The engines of the LLM judges (the panel's, built once per run) with their prices."""
        return [(self.engines.engine(name, spec), spec.price_per_mtok) for name, spec in self._specs()]

    def remote(self) -> bool:
        """Does some LLM judge run on a paid or remote backend (``REMOTE_BACKENDS``)?"""
        return any(resolved_backend(spec) in REMOTE_BACKENDS for _, spec in self._specs())
