"""``ScaleResource``: the Ray cluster of ``scale.ray`` (dedup's shuffle, the sandbox fan-out), if set."""

from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from ptfactory.assets.resources.settings import SettingsResource

__all__ = ["ScaleResource"]


class ScaleResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Ray directly, not dagster-ray: see docs/scaling.md."""

    settings: SettingsResource

    _ray_owner: bool = PrivateAttr(default=False)

    def ray_connected(self) -> bool:
        """Connect this process to ``scale.ray.address`` (once; False when that is empty)."""
        address = self.settings.config.scale.ray.address
        if not address:
            return False
        import ray

        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False)
            self._ray_owner = True
        return True

    def dedup_engine(self) -> Any:
        """The Ray dedup path when ``scale.ray`` is set, else None (in-process)."""
        if not self.ray_connected():
            return None
        from ptfactory.filters.dedup.distributed import RayDedup

        return RayDedup(shard_rows=self.settings.config.scale.ray.shard_rows)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._ray_owner:
            import ray

            ray.shutdown()
            self._ray_owner = False
