"""Training: SFT and DPO entry points over pinned dataset versions (no Dagster here)."""
