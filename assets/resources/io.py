"""``SampleIOManager``: each stage's output as ``PTF_HOME/assets/<asset>/<partition>.parquet``."""

from __future__ import annotations

import dagster as dg
import pyarrow as pa

from ptfactory.home import ptf_home
from ptfactory.storage.assetstore import AssetStore

__all__ = ["SampleIOManager"]


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
