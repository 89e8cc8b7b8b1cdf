"""Where stage outputs live between stages: one Parquet file per asset and partition.

``PTF_HOME/assets/<asset>/<partition>.parquet`` (``__all__`` for unpartitioned assets).
Every stage writes kept *and* dropped rows, so these files are where "why was this
row dropped?" is answered (``ptf lineage``).
"""

from __future__ import annotations

import posixpath
import re

import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.home import ptf_home
from ptfactory.storage.audit import checks_from_metadata
from ptfactory.storage.fs import Store
from ptfactory.storage.shards import PARQUET_OPTIONS

__all__ = ["UNPARTITIONED", "AssetStore"]

UNPARTITIONED = "__all__"
_SAFE = re.compile(r"[^A-Za-z0-9_.=-]")


def _file_name(partition: str | None) -> str:
    # Partition keys are user text (batch names); keep file names portable and reversible enough.
    key = partition if partition is not None else UNPARTITIONED
    return _SAFE.sub("_", key) + ".parquet"


class AssetStore:
    def __init__(self, home: str | None = None) -> None:
        self.store = Store(posixpath.join(home or ptf_home(), "assets"))

    def path(self, asset: str, partition: str | None = None) -> str:
        return self.store.path(asset, _file_name(partition))

    def write(self, asset: str, table: pa.Table, partition: str | None = None) -> str:
        path = self.path(asset, partition)
        with self.store.atomic_writer(path) as handle:
            pq.write_table(table, handle, **PARQUET_OPTIONS)
        return path

    def exists(self, asset: str, partition: str | None = None) -> bool:
        return self.store.exists(self.path(asset, partition))

    def read(self, asset: str, partition: str | None = None) -> pa.Table:
        return self.read_file(self.path(asset, partition))

    def read_file(self, path: str) -> pa.Table:
        """One file that :meth:`files` listed."""
        return self.store.read_table(path)

    def schema(self, asset: str, partition: str | None = None) -> pa.Schema | None:
        """The schema (with its metadata) of ``asset``'s file for ``partition``, read from the
        footer alone; None when the file is missing."""
        path = self.path(asset, partition)
        if not self.store.exists(path):
            return None
        # a local file natively, a remote one fetched (never a Python file object)
        source = path if self.store.local else pa.BufferReader(self.store.read_bytes(path))
        return pq.read_schema(source)

    def recorded_checks(self, asset: str, partition: str | None = None) -> dict[str, bool] | None:
        """The check outcomes ``asset`` recorded in its file for ``partition`` (see
        ``storage.audit.checks_metadata``); None when the file is missing or recorded none."""
        schema = self.schema(asset, partition)
        return None if schema is None else checks_from_metadata(schema)

    def assets(self) -> list[str]:
        return self.store.listdir(self.store.root)

    def files(self, asset: str | None = None) -> list[str]:
        names = [asset] if asset else self.assets()
        return [
            self.store.path(a, f)
            for a in names
            for f in self.store.listdir(self.store.path(a))
            if f.endswith(".parquet") and not f.startswith(".tmp-")
        ]
