"""One thin Dagster asset module per stage; the logic lives in the library packages."""
