"""Storage: the sample schema, Parquet shards, versioned datasets, the DuckDB catalog, pull and lineage.

A plain library (no Dagster): usable from a notebook, the trainer, or another orchestrator.
"""

from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.manifest import Manifest
from ptfactory.storage.pull import pull
from ptfactory.storage.schema import SAMPLE_SCHEMA, from_records, sample_id, validate_table
from ptfactory.storage.versions import DatasetStore, PublishResult, parse_ref

__all__ = [
    "SAMPLE_SCHEMA",
    "AssetStore",
    "DatasetStore",
    "Manifest",
    "PublishResult",
    "from_records",
    "parse_ref",
    "pull",
    "sample_id",
    "validate_table",
]
