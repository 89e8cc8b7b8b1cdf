"""``SettingsResource``: the factory.yaml a run acts under, and the stores under PTF_HOME.

Every other resource nests this one. **Which config a run acts under** (``batch_configs`` on: the
Definitions, ``ptf run``, ``ptf annotate``, the sensor and the schedule):

- a run for one batch (its partition) uses the config that batch recorded when ``ptf run --config
  F`` started it (``storage/batch_config.py``): its stages, its review tasks, and the publish at the
  end of its run;
- a run for no batch (curation and publish from the label sensor, ``ptf annotate pull`` or the UI;
  the sensor's push and pull) uses the config of the batch recorded **last**: dataset-level settings
  (dataset names, split, shard size, the published index's dedup, calibration) follow the newest
  batch, and a version's ``config_hash`` is that config's; each batch's own hash is listed beside it
  (``stats.batch_configs`` of the manifest), and each batch's rows keep what its config made them;
- ``config_path`` serves where no batch recorded one (a batch staged by hand, a fresh project), and
  always with ``batch_configs`` off (``ptf judge``, ``ptf agent run``: commands that act on no batch).
"""

from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import yaml
from pydantic import PrivateAttr

from ptfactory.annotators.review_queue import ReviewQueue
from ptfactory.config import FactoryConfig, load_config, parse_config
from ptfactory.errors import ConfigError
from ptfactory.filters.decontamination import NgramIndex, load_index
from ptfactory.filters.dedup.index import BandParquet, PublishedIndex
from ptfactory.filters.dedup.semantic import PublishedPrompts
from ptfactory.home import is_local_url, local_state_dir, project_root, ptf_home
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.batch_config import BatchConfigs, ConfigRecord
from ptfactory.storage.seedstore import SeedStore
from ptfactory.storage.versions import DatasetStore

__all__ = ["RunConfig", "SettingsResource", "record_batch_config"]

PARTITION_TAG = "dagster/partition"


@dataclass(frozen=True)
class RunConfig:
    """A resolved factory.yaml: the model, the file it came from, its hash, and the batch that
    recorded it (None: read from ``config_path`` now)."""

    config: FactoryConfig
    path: Path
    hash: str
    batch: str | None = None


def _absolute(path: str | Path) -> Path:
    path = Path(path)
    return path if path.is_absolute() else project_root() / path


def _from_record(record: ConfigRecord) -> RunConfig:
    source = f"{record.path} (as batch {record.batch!r} recorded it)"
    try:
        data = yaml.safe_load(record.text) if record.text else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML ({exc})") from None
    return RunConfig(parse_config(data, source), Path(record.path), record.hash, record.batch)


def record_batch_config(home: str, batch: str, path: Path) -> RunConfig:
    """Record ``path`` (validated) as the config ``batch`` runs under; what ``ptf run`` does."""
    path = _absolute(path)
    config = load_config(path)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    BatchConfigs(home).record(batch, path=str(path), config_hash=config.config_hash(), text=text)
    return RunConfig(config, path, config.config_hash(), batch)


class SettingsResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The factory.yaml a run acts under (see the module doc) and the stores under PTF_HOME."""

    config_path: str = "factory.yaml"
    home: str = ""  # empty: $PTF_HOME or <project>/.ptf
    batch_configs: bool = False  # act under the batches' recorded configs (the module doc)

    _batch: str | None = PrivateAttr(default=None)
    _resolved: dict[str, RunConfig] = PrivateAttr(default_factory=dict)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        run = context.dagster_run
        self._batch = run.tags.get(PARTITION_TAG) if run is not None else None

    # -- which config -------------------------------------------------------------------------
    def from_file(self) -> RunConfig:
        """``config_path`` as it is now (what a new batch records)."""
        if "" not in self._resolved:
            path = _absolute(self.config_path)
            config = load_config(path)
            self._resolved[""] = RunConfig(config, path, config.config_hash())
        return self._resolved[""]

    def for_batch(self, batch: str) -> RunConfig:
        """The config ``batch`` recorded (``config_path`` if it recorded none, or ``batch_configs`` is off)."""
        if not self.batch_configs:
            return self.from_file()
        key = f"batch:{batch}"
        if key not in self._resolved:
            record = BatchConfigs(self.resolved_home).get(batch)
            self._resolved[key] = _from_record(record) if record is not None else self.from_file()
        return self._resolved[key]

    def governing(self) -> RunConfig:
        """What a run for no batch acts under: the config recorded last (else ``config_path``)."""
        if not self.batch_configs:
            return self.from_file()
        if "newest" not in self._resolved:
            # through for_batch's cache: the newest batch's record is read once however it is asked
            batch = BatchConfigs(self.resolved_home).newest_batch()
            self._resolved["newest"] = self.for_batch(batch) if batch is not None else self.from_file()
        return self._resolved["newest"]

    @property
    def run_config(self) -> RunConfig:
        """This run's: its batch's, or the governing one for a run of no batch."""
        return self.for_batch(self._batch) if self._batch else self.governing()

    @property
    def config(self) -> FactoryConfig:
        return self.run_config.config

    @property
    def config_dir(self) -> Path:
        """Where relative paths inside the config (``agent.tasks``) resolve from."""
        return self.run_config.path.parent

    def batch_hashes(self, batches: list[str]) -> dict[str, str]:
        """Each batch's config hash: the recorded one, or this run's for a batch that recorded none."""
        return {batch: self.for_batch(batch).hash for batch in batches}

    # -- where state lives --------------------------------------------------------------------
    @property
    def resolved_home(self) -> str:
        return self.home or ptf_home()

    @property
    def state_dir(self) -> Path:
        """Local state (caches, ledgers, models): PTF_HOME itself when that is a local path."""
        home = self.resolved_home
        return Path(home) if is_local_url(home) else local_state_dir()

    def datasets(self) -> DatasetStore:
        return DatasetStore(self.resolved_home)

    def seeds(self) -> SeedStore:
        return SeedStore(self.resolved_home)

    def asset_store(self) -> AssetStore:
        return AssetStore(self.resolved_home)

    def review_queue(self) -> ReviewQueue:
        """The rows waiting for an expert, every batch's (annotators/review_queue.py)."""
        return ReviewQueue(self.state_dir / "review" / "queue.sqlite")

    def dedup_index(self) -> PublishedIndex:
        """The published-sample index; with ``scale.ray`` set its truth is Parquet under PTF_HOME (any
        worker reads it) and the DuckDB file this machine's cache of it."""
        config = self.config
        parquet = None
        if config.scale.ray.address:
            parquet = BandParquet(f"{self.resolved_home.rstrip('/')}/index/dedup")
        return PublishedIndex(self.state_dir / "dedup_index.duckdb", config.dedup, parquet)

    def published_prompts(self) -> PublishedPrompts:
        """Embeddings of the published instructions (semantic dedup against published versions)."""
        return PublishedPrompts(self.state_dir / "semantic")

    def decontamination_index(self) -> NgramIndex:
        """The benchmark n-gram index ``decontamination`` asks for: built once, then read from the
        cache under the state dir by its content key (user files resolve from the config's folder,
        as ``agent.tasks`` do)."""
        return load_index(self.config.decontamination, self.state_dir, self.config_dir)
