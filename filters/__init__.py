"""Filters: dedup, execution validation, difficulty; typed configs and pure functions over Arrow tables."""
