"""The base of every section of factory.yaml: unknown keys are errors, values are frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Section"]


class Section(BaseModel):
    """A strict, immutable settings block (a typo in factory.yaml is an error, not a silent default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
