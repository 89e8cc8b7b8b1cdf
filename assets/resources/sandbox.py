"""``SandboxResource``: where untrusted code runs, under the run's ``sandbox`` limits."""

import dagster as dg

from ptfactory.assets.resources.scale import ScaleResource
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.select import open_sandbox

__all__ = ["SandboxResource"]


class SandboxResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """A sandbox pool per use (the caller closes it): this machine's, or with ``scale.ray`` set
    every node's for the validation fan-out."""

    scale: ScaleResource

    def pool(self) -> Sandbox:
        """Every node's sandbox pool when ``scale.ray`` is set, else this machine's."""
        settings = self.scale.settings.config.sandbox
        if self.scale.ray_connected():
            from ptfactory.filters.execution.distributed import RaySandbox

            chunk = self.scale.settings.config.scale.ray.chunk_jobs
            return RaySandbox(settings, settings.workers, settings.backend, chunk)
        return self.local()

    def local(self, workers: int | None = None) -> Sandbox:
        """This machine's pool (``workers`` containers at most; default ``sandbox.workers``)."""
        settings = self.scale.settings.config.sandbox
        return open_sandbox(settings, workers or settings.workers, settings.backend)
