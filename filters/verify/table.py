"""Running verifiers over a table of sample records, and recording their verdicts in ``scores``.

:func:`verify_table` reads the table in batches; in each batch every verifier gets the rows it
applies to in one ``verify_many`` call (code jobs fanned out over the sandbox's workers, answers
over the math-verify pool), the verifiers side by side in threads (their work happens in the
sandbox's containers and in worker processes). :func:`record_verdicts` writes the lists into
``scores.verifiers`` (the panel puts them first in ``scores``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from ptfactory.filters.verify.base import Verdict, Verifier
from ptfactory.storage.schema import VERIFIER_VOTE, set_score

__all__ = ["record_verdicts", "verdicts_array", "verify_rows", "verify_table"]

DEFAULT_BATCH = 512


def verify_rows(rows: Sequence[dict[str, Any]], verifiers: Sequence[Verifier]) -> list[list[Verdict]]:
    """Each row's verdicts, one per verifier that applies to it (in ``verifiers``' order)."""
    out: list[list[Verdict]] = [[] for _ in rows]
    applicable = [[i for i, row in enumerate(rows) if v.applies(row)] for v in verifiers]

    def run(pair: tuple[Verifier, list[int]]) -> list[Verdict]:
        verifier, indices = pair
        return verifier.verify_many([rows[i] for i in indices]) if indices else []

    with ThreadPoolExecutor(max_workers=max(1, len(verifiers))) as threads:
        results = list(threads.map(run, zip(verifiers, applicable, strict=True)))
    for indices, verdicts in zip(applicable, results, strict=True):
        for index, verdict in zip(indices, verdicts, strict=True):
            out[index].append(verdict)
    return out


def verify_table(
    table: pa.Table,
    verifiers: Sequence[Verifier],
    *,
    rows: Sequence[int] | None = None,
    extra: Sequence[dict[str, Any]] | None = None,
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> list[list[Verdict]]:
    """Per row of ``table``, the verdicts of the verifiers that apply (``[]`` where none does, and
    for rows not in ``rows`` when it is given).

    ``extra``: per row of the table, fields merged into the row a verifier reads (what
    :func:`~ptfactory.filters.verify.inputs.verifier_inputs` builds from named columns).
    ``progress(done, total)`` is called after each batch.
    """
    if extra is not None and len(extra) != table.num_rows:
        raise ValueError(f"extra has {len(extra)} entries for {table.num_rows} rows")
    chosen = list(range(table.num_rows)) if rows is None else list(rows)
    out: list[list[Verdict]] = [[] for _ in range(table.num_rows)]
    for start in range(0, len(chosen), batch_size):
        indices = chosen[start : start + batch_size]
        batch = table.take(pa.array(indices, pa.int64())).to_pylist()
        if extra is not None:
            batch = [{**row, **extra[i]} for row, i in zip(batch, indices, strict=True)]
        for index, verdicts in zip(indices, verify_rows(batch, verifiers), strict=True):
            out[index] = verdicts
        if progress is not None:
            progress(min(start + batch_size, len(chosen)), len(chosen))
    return out


def verdicts_array(verdicts: Sequence[Sequence[Verdict]]) -> pa.Array:
    """``list<VERIFIER_VOTE>`` per row (null where no verifier applied)."""
    return pa.array(
        [[v.to_record() for v in row] if row else None for row in verdicts], pa.list_(VERIFIER_VOTE)
    )


def record_verdicts(
    table: pa.Table, verdicts: Sequence[Sequence[Verdict]], *, rows: Sequence[int] | None = None
) -> pa.Table:
    """``table`` with ``scores.verifiers`` set for every row (or only ``rows``, which ``verdicts``
    then line up with); the other scores untouched."""
    return set_score(table, "verifiers", verdicts_array(verdicts), rows=rows)
