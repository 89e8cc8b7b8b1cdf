"""The configuration a batch ran with, kept with the batch: ``PTF_HOME/seeds/<batch>/.config.json``.

``ptf run --config F`` records F beside the batch's staged seeds: its path, the hash of the resolved
configuration (what a manifest's ``config_hash`` names) and the file's text, so whatever acts on the
batch later (its assets rerun from the UI, its review tasks, the curation and publish the label
sensor starts) runs under that config and not whatever factory.yaml is current then. A rerun of the
batch records again (its outputs are then made under the new config). ``seeds/.newest-config.json``
names the batch recorded last: its config governs what belongs to no batch (see
``ptfactory.assets.resources.settings``).

Only text and hashes live here; parsing the text into the ``factory.yaml`` model happens above
storage (``ptfactory.config``).
"""

from __future__ import annotations

import json
import posixpath
import time
from dataclasses import asdict, dataclass

from ptfactory.home import ptf_home
from ptfactory.storage.fs import Store

__all__ = ["BatchConfigs", "ConfigRecord"]

_RECORD = ".config.json"
_NEWEST = ".newest-config.json"


@dataclass(frozen=True)
class ConfigRecord:
    batch: str
    path: str  # the file the batch ran with (absolute; relative paths inside it resolve from there)
    hash: str  # FactoryConfig.config_hash() of that file's resolved configuration
    text: str  # the file's text ("" when there was no file: the defaults)
    recorded_at: float


class BatchConfigs:
    def __init__(self, home: str | None = None) -> None:
        self.store = Store(posixpath.join(home or ptf_home(), "seeds"))

    def _path(self, batch: str) -> str:
        return self.store.path(batch, _RECORD)

    def record(self, batch: str, *, path: str, config_hash: str, text: str) -> ConfigRecord:
        """Record (or replace) what ``batch`` runs under; it becomes the newest record."""
        record = ConfigRecord(batch, path, config_hash, text, time.time())
        body = (json.dumps(asdict(record), indent=2, sort_keys=True) + "\n").encode()
        self.store.makedirs(self.store.path(batch))
        self.store.write_bytes_atomic(self._path(batch), body)
        newest = json.dumps({"batch": batch, "recorded_at": record.recorded_at}) + "\n"
        self.store.write_bytes_atomic(self.store.path(_NEWEST), newest.encode())
        return record

    def get(self, batch: str) -> ConfigRecord | None:
        """What ``batch`` recorded, or None (a batch staged before configs were recorded, or by hand)."""
        path = self._path(batch)
        if not self.store.exists(path):
            return None
        body = json.loads(self.store.read_bytes(path))
        return ConfigRecord(
            str(body["batch"]),
            str(body["path"]),
            str(body["hash"]),
            str(body["text"]),
            float(body["recorded_at"]),
        )

    def newest_batch(self) -> str | None:
        """The batch that recorded last (its record is :meth:`get`'s), or None when none did."""
        pointer = self.store.path(_NEWEST)
        if not self.store.exists(pointer):
            return None
        return str(json.loads(self.store.read_bytes(pointer))["batch"])

    def newest(self) -> ConfigRecord | None:
        """The record written last, or None when no batch recorded one."""
        batch = self.newest_batch()
        return self.get(batch) if batch is not None else None
