"""Procedural seeds: tasks drawn from reasoning-gym's generators, each with the scorer that checks it.

``draw_seed_rows(["basic_arithmetic", "chain_sum"], count=50, seed=0)`` gives seed-file rows (the
format of generators/seeds.py): ``id`` (``<family>-<seed>-<index>``: stable, so a larger count
extends a smaller one), ``instruction`` (the generator's question, then :data:`ANSWER_FORMAT`),
``answer`` (the generator's oracle answer, left out for families with many valid answers, which
score from the metadata) and ``metadata`` (reasoning-gym's entry metadata, intact: its
``source_dataset`` names the family and the family's scorer reads the rest). The procedural
verifier (filters/verify/procedural.py) scores a response's ``<answer>`` block with that scorer.

The families are reasoning-gym's registered datasets less a deny-list
(:data:`~ptfactory.filters.verify.procedural.DENIED`: benchmark test items such as
``gsm_symbolic``'s GSM8K templates, and metadata JSON cannot carry). ``ptf seeds procedural`` writes
the rows to a JSONL seed file; the ``seeds.procedural`` section of factory.yaml
(:class:`ProceduralSeeds`) adds them to every batch's seeds (:func:`procedural_seed_tasks`).

reasoning-gym is installed whole (its dependencies, pycosat and cellpylib built from source, with
constraints.txt's tabulate pinned to its 0.9.0): ``import reasoning_gym`` imports every family's
module, so every dependency is needed whatever families are enabled.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ptfactory.errors import UserInputError
from ptfactory.filters.verify.procedural import family_problem
from ptfactory.generators.seeds import SeedTask, parse_seed
from ptfactory.section import Section

__all__ = ["ANSWER_FORMAT", "ProceduralSeeds", "draw_seed_rows", "procedural_seed_tasks", "write_seed_file"]

# what the procedural verifier reads: reasoning-gym's own <answer> format
ANSWER_FORMAT = "Give your final answer between <answer> and </answer> tags."
_DRAWS_PER_TASK = 5  # a small family repeats questions: look this many indices further per task wanted


class ProceduralSeeds(Section):
    """``seeds.procedural`` in factory.yaml: reasoning-gym tasks added to every batch's seeds."""

    datasets: list[str] = Field(
        default_factory=list,
        description="reasoning-gym families to draw tasks from (e.g. basic_arithmetic, chain_sum); "
        "empty: no procedural seeds",
    )
    count: int = Field(20, ge=1, le=100_000, description="tasks drawn per family")
    seed: int = Field(0, ge=0, description="the draw's seed: the same seed draws the same tasks")

    @field_validator("datasets")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        for name in names:
            if problem := family_problem(name):
                raise ValueError(problem)
        if len(set(names)) != len(names):
            raise ValueError("a family is listed twice")
        return names


def _entries(family: str, count: int, seed: int) -> list[tuple[int, dict[str, Any]]]:
    """``count`` entries of ``family`` with distinct questions, with their index."""
    import reasoning_gym

    size = count * _DRAWS_PER_TASK
    dataset = reasoning_gym.create_dataset(family, seed=seed, size=size)
    found: list[tuple[int, dict[str, Any]]] = []
    questions: set[str] = set()
    for index in range(size):
        entry = dataset[index]
        if entry["question"] in questions:
            continue
        questions.add(entry["question"])
        found.append((index, entry))
        if len(found) == count:
            break
    return found


def draw_seed_rows(families: Sequence[str], count: int, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` seed rows per family (fewer where a family has fewer distinct questions).

    Raises :class:`UserInputError` naming an unknown or denied family."""
    for family in families:
        if problem := family_problem(family):
            raise UserInputError(problem)
    rows = []
    for family in families:
        for index, entry in _entries(family, count, seed):
            metadata = entry["metadata"]
            try:
                json.dumps(metadata)
            except TypeError as exc:
                raise UserInputError(
                    f"procedural family {family!r}: its metadata is not JSON ({exc})"
                ) from None
            row: dict[str, Any] = {
                "id": f"{family}-{seed}-{index}",
                "instruction": f"{entry['question'].rstrip()}\n\n{ANSWER_FORMAT}",
                "metadata": metadata,
            }
            if isinstance(entry.get("answer"), str):
                row["answer"] = entry["answer"]
            rows.append(row)
    return rows


def write_seed_file(rows: Sequence[dict[str, Any]], out: Path) -> None:
    """JSONL, one row a line, written atomically (a temp file in the same folder, renamed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".tmp-{os.getpid()}-{out.name}")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def procedural_seed_tasks(config: ProceduralSeeds, max_field_chars: int = 100_000) -> list[SeedTask]:
    """The section's tasks as seed tasks, validated as a seed file's rows are."""
    rows = draw_seed_rows(config.datasets, config.count, config.seed)
    return [parse_seed(f"seeds.procedural: {row['id']}", row, max_field_chars) for row in rows]
