"""The ``batch`` partition: one per seed set fed to the factory (``ptf run`` adds it)."""

import dagster as dg

BATCH_PARTITIONS_NAME = "batch"
batch_partitions = dg.DynamicPartitionsDefinition(name=BATCH_PARTITIONS_NAME)
