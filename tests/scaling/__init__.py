"""Tests of running past one machine: PostgreSQL-backed Dagster, Ray."""
