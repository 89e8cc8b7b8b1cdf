"""The composition root: Definitions, resources, partitions, jobs, sensors, config and the `ptf` CLI."""
