"""Storage: the sample schema, Parquet shards, versioned datasets, the DuckDB catalog, pull and lineage.

A plain library (no Dagster): usable from a notebook, the trainer, or another orchestrator.
"""

from storage.assetstore import AssetStore
from storage.manifest import Manifest
from storage.pull import pull
from storage.schema import SAMPLE_SCHEMA, from_records, sample_id, validate_table
from storage.versions import DatasetStore, PublishResult, parse_ref

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
