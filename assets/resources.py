"""Dagster resources: the factory configuration, the stores, and the IO manager for stage outputs.

Clients are built lazily (``setup_for_execution`` or on first use), never at import,
so loading the definitions is cheap and needs no running service.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
from pydantic import PrivateAttr

from ptfactory.annotators.judges import ExecutionJudge, Judge, LLMJudge, Panel, RelevanceJudge
from ptfactory.annotators.judges.calibration import latest_stats, weights_for
from ptfactory.annotators.labelstudio.client import LabelStudioClient
from ptfactory.annotators.labelstudio.ledger import Ledger
from ptfactory.annotators.labelstudio.server import LabelStudioServer
from ptfactory.config import FactoryConfig, load_config
from ptfactory.engines.base import Engine
from ptfactory.engines.spec import EngineSpec, build_engine
from ptfactory.filters.dedup.index import BandParquet, PublishedIndex
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.select import open_sandbox
from ptfactory.home import is_local_url, local_state_dir, project_root, ptf_home
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.seedstore import SeedStore
from ptfactory.storage.versions import DatasetStore

__all__ = ["FactoryResource", "SampleIOManager"]


class FactoryResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Configuration (factory.yaml) and the stores under PTF_HOME."""

    config_path: str = "factory.yaml"
    home: str = ""  # empty: $PTF_HOME or <project>/.ptf

    _config: FactoryConfig | None = PrivateAttr(default=None)
    _engines: dict[str, Engine] = PrivateAttr(default_factory=dict)
    _ray_owner: bool = PrivateAttr(default=False)

    @property
    def resolved_home(self) -> str:
        return self.home or ptf_home()

    @property
    def config(self) -> FactoryConfig:
        if self._config is None:
            path = Path(self.config_path)
            if not path.is_absolute():
                path = project_root() / path
            self._config = load_config(path)
        return self._config

    @property
    def state_dir(self) -> Path:
        """Local state (response cache, models): PTF_HOME itself when that is a local path."""
        home = self.resolved_home
        return Path(home) if is_local_url(home) else local_state_dir()

    def engine(self, role: str, spec: EngineSpec | None = None) -> Engine:
        """The engine configured under ``engines.<role>`` (or ``spec``), built once per run; one
        engine per distinct spec, so a judge on the generator's model shares its loaded weights."""
        spec = spec or getattr(self.config.engines, role)
        key = spec.model_dump_json()
        if key not in self._engines:
            self._engines[key] = build_engine(spec, self.state_dir / "cache" / "responses.sqlite")
        return self._engines[key]

    def panel(self) -> Panel:
        judges: list[Judge] = []
        for spec in self.config.judges:
            if spec.type == "llm":
                engine_spec = spec.engine or self.config.engines.generator
                judges.append(
                    LLMJudge(
                        spec.name,
                        engine=self.engine(spec.name, engine_spec),
                        rubric=spec.rubric,
                        max_tokens=spec.max_tokens,
                        scoring=spec.scoring,
                        prompt_style=spec.prompt,
                        likelihood_center=spec.likelihood_center,
                        likelihood_scale=spec.likelihood_scale,
                    )
                )
                judges[-1].stats.price_per_mtok = engine_spec.price_per_mtok
            elif spec.type == "relevance":
                judges.append(RelevanceJudge(spec.name))
            else:
                judges.append(ExecutionJudge(spec.name))
        return Panel(
            judges,
            min_counted_share=self.config.judging.min_counted_share,
            # reliability weights fitted on the expert labels of the latest SFT version (None: equal)
            weights=weights_for(
                latest_stats(self.datasets(), self.config.datasets.sft),
                self.config.judging.calibration_min_labels,
            ),
        )

    def price_per_mtok(self, role: str) -> float:
        return float(getattr(self.config.engines, role).price_per_mtok)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()
        if self._ray_owner:
            import ray

            ray.shutdown()
            self._ray_owner = False

    def ray_connected(self) -> bool:
        """Connect this process to ``scale.ray.address`` (once; False when that is empty): the Ray
        resource of the dedup and execution assets. Ray directly, not dagster-ray: see docs/scaling.md."""
        address = self.config.scale.ray.address
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

        return RayDedup(shard_rows=self.config.scale.ray.shard_rows)

    def sandbox(self) -> Sandbox:
        """Every node's sandbox pool when ``scale.ray`` is set, else this machine's."""
        settings = self.config.sandbox
        if self.ray_connected():
            from ptfactory.filters.execution.distributed import RaySandbox

            return RaySandbox(
                settings.limits(), settings.workers, settings.backend, self.config.scale.ray.chunk_jobs
            )
        return open_sandbox(settings.limits(), settings.workers, settings.backend)

    def dedup_index(self) -> PublishedIndex:
        """The published-sample index; with ``scale.ray`` set its truth is Parquet under PTF_HOME (any
        worker reads it) and the DuckDB file this machine's cache of it."""
        parquet = None
        if self.config.scale.ray.address:
            parquet = BandParquet(f"{self.resolved_home.rstrip('/')}/index/dedup")
        return PublishedIndex(self.state_dir / "dedup_index.duckdb", self.config.dedup.to_config(), parquet)

    def chat_tokenizer(self) -> Any:
        """The generator's tokenizer (the bundled model's for a remote engine): the chat template the
        published rows are checked against."""
        from transformers import AutoTokenizer

        from ptfactory.engines.bundled import resolve_model_path

        spec = self.config.engines.generator
        model = spec.model if spec.backend != "openai" else "bundled"
        path = resolve_model_path(model)
        return AutoTokenizer.from_pretrained(path, local_files_only=Path(path).is_dir())

    def label_studio(self) -> LabelStudioServer:
        return LabelStudioServer(self.state_dir, port=self.config.annotation.port)

    def label_studio_client(self) -> LabelStudioClient:
        """A client for the configured Label Studio (ours unless ``annotation.url`` names another)."""
        section = self.config.annotation
        server = self.label_studio()
        token = os.environ.get(section.token_env) or server.credentials().token
        return LabelStudioClient(section.url or server.url, token)

    def label_ledger(self) -> Ledger:
        return Ledger(self.state_dir / "annotation" / "ledger.sqlite")

    def datasets(self) -> DatasetStore:
        return DatasetStore(self.resolved_home)

    def seeds(self) -> SeedStore:
        return SeedStore(self.resolved_home)

    def asset_store(self) -> AssetStore:
        return AssetStore(self.resolved_home)


class SampleIOManager(dg.ConfigurableIOManager):
    """Stores each asset partition as ``PTF_HOME/assets/<asset>/<partition>.parquet``.

    A downstream asset that maps onto all partitions (a dataset built from every batch)
    gets them concatenated; batches that never materialized are skipped with a warning,
    so one failed batch does not block publishing the others.
    """

    home: str = ""

    def _store(self) -> AssetStore:
        return AssetStore(self.home or ptf_home())

    def handle_output(self, context: dg.OutputContext, obj: pa.Table | None) -> None:
        if obj is None:
            return
        asset = context.asset_key.to_user_string()
        partitions = context.asset_partition_keys if context.has_asset_partitions else [None]
        if len(partitions) != 1:
            raise ValueError(f"{asset}: one output per partition expected, got {len(partitions)}")
        path = self._store().write(asset, obj, partitions[0])
        context.add_output_metadata({"path": dg.MetadataValue.path(path)})

    def load_input(self, context: dg.InputContext) -> pa.Table:
        asset = context.asset_key.to_user_string()
        store = self._store()
        partitions: list[str | None] = (
            list(context.asset_partition_keys) if context.has_asset_partitions else [None]
        )
        tables = []
        missing = []
        for key in partitions:
            if store.exists(asset, key):
                tables.append(store.read(asset, key))
            else:
                missing.append(key)
        if missing and (len(partitions) == 1 or not tables):
            raise FileNotFoundError(
                f"{asset} has no stored output for partition(s) {missing}; materialize it first"
            )
        if missing:
            context.log.warning(f"{asset}: skipping partitions never materialized: {missing}")
        if len(tables) == 1:
            return tables[0]
        return pa.concat_tables(tables, promote_options="default")
