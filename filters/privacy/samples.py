"""The privacy stage over sample records and seed tasks: nothing stored keeps a raw value.

:func:`redact_table` redacts every text field of every row (messages and their tool calls,
chosen, rejected, tests, steps, outcome, judges' rationales and raw replies, execution output
tails, annotation edits) and is what any writer of a stored artefact can call; :func:`clean_samples`
is the stage: it redacts and adds one ``privacy`` decision per live row with findings (type and
count as canonical JSON in ``detail``, never a value). :func:`redact_seed` cleans a seed task dict
before it is staged, so even the staged copy of a seed file holds no raw value.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ptfactory.filters.execution.programs import code_blocks, extract_solution
from ptfactory.filters.privacy.config import PrivacyConfig
from ptfactory.filters.privacy.redact import parses, redact_record
from ptfactory.filters.verify.inputs import tests_text
from ptfactory.storage.schema import add_decision, dropped_mask, prompt_of, response_of

__all__ = ["STAGE", "PrivacyStats", "clean_samples", "record_redactions", "redact_seed", "redact_table"]

STAGE = "privacy"
# Fields that hold ids, enums, hashes or names of things, never free text.
_SKIP = frozenset(
    {
        "sample_id", "batch", "kind", "language", "entry_point", "role", "stage", "verdict", "reason",
        "tool_call_id", "id", "type", "name", "method", "template_id", "template_hash", "engine", "model",
        "code_version", "finish_reason", "representative_id", "status", "tree_hash", "check_hash",
        "initial_hash", "judge", "seed_task_id", "parent_id", "annotator", "stop_reason", "task_id",
        "preference", "sampling_params", "decisions",
    }
)  # fmt: skip
_SEED_SKIP = frozenset({"id", "kind", "entry_point"})


@dataclass
class PrivacyStats:
    rows_in: int = 0
    rows_with_findings: int = 0
    found: Counter[str] = field(default_factory=Counter)
    routed: int = 0
    dropped: int = 0
    seconds: float = 0.0

    def as_metadata(self) -> dict[str, Any]:
        return {
            "rows_in": self.rows_in,
            "rows_redacted": self.rows_with_findings,
            "redactions": dict(self.found),
            "routed_to_review": self.routed,
            "dropped": self.dropped,
            "seconds": round(self.seconds, 3),
        }


def _code(prompt: str, response: str, entry_point: str, tests: str | None) -> dict[str, str | None]:
    """A code row's texts that must still parse after redaction: its tests, its solution, and each
    fenced Python block of the reply on its own (the solution joins a prose prompt's stub to the
    code; where that does not parse, the blocks still say whether redaction broke the code)."""
    try:
        solution = extract_solution(prompt, response, entry_point)
    except Exception:  # an unparseable answer: its tests still decide what is test data
        solution = response
    texts: dict[str, str | None] = {"tests": tests, "solution": solution}
    texts.update({f"block {i}": block for i, block in enumerate(code_blocks(response))})
    return texts


def _code_texts(row: dict[str, Any]) -> dict[str, str | None] | None:
    if row.get("kind") != "code":
        return None
    messages = row.get("messages") or []
    return _code(prompt_of(messages), response_of(messages), row.get("entry_point") or "", row.get("tests"))


def _redact_rows(
    rows: list[dict[str, Any]], config: PrivacyConfig
) -> tuple[list[dict[str, Any]], list[dict[str, int]], list[bool]]:
    cleaned, counts, consistent = [], [], []
    for row in rows:
        new, found, ok = redact_record(row, config, skip=_SKIP, code=_code_texts(row))
        cleaned.append(new)
        counts.append(found)
        consistent.append(ok)
    return cleaned, counts, consistent


def redact_table(
    table: pa.Table, config: PrivacyConfig | None = None
) -> tuple[pa.Table, list[dict[str, int]]]:
    """Every text field of every row redacted (same schema back), and each row's counts per type."""
    config = config or PrivacyConfig()
    if not config.enabled or not table.num_rows:
        return table, [{} for _ in range(table.num_rows)]
    cleaned, counts, _ = _redact_rows(table.to_pylist(), config)
    return pa.Table.from_pylist(cleaned, schema=table.schema), counts


def clean_samples(table: pa.Table, config: PrivacyConfig | None = None) -> tuple[pa.Table, PrivacyStats]:
    """The stage: every row redacted (dropped ones too: they are stored); each live row with findings
    gets a ``privacy`` decision: ``keep``/``redacted``, or with ``action`` drop / review,
    ``drop``/``personal_data`` or ``route``/``personal_data``; a code row whose code no longer parses
    after redaction is routed with ``redaction_breaks_code`` whatever the action (except drop)."""
    started = time.perf_counter()
    config = config or PrivacyConfig()
    stats = PrivacyStats(rows_in=table.num_rows)
    if not config.enabled or not table.num_rows:
        return table, stats
    cleaned, counts, consistent = _redact_rows(table.to_pylist(), config)
    out = pa.Table.from_pylist(cleaned, schema=table.schema)
    out = _decide(out, counts, consistent, config, stats=stats, dropped=dropped_mask(table))
    stats.seconds = time.perf_counter() - started
    return out, stats


def record_redactions(
    table: pa.Table, counts: list[dict[str, int]], config: PrivacyConfig | None = None
) -> tuple[pa.Table, PrivacyStats]:
    """``privacy`` decisions for redactions made before the rows were built (seeds redacted when
    staged: ``counts`` per row, from :mod:`.seedfiles`), as :func:`clean_samples` records its own."""
    config = config or PrivacyConfig()
    stats = PrivacyStats(rows_in=table.num_rows)
    if len(counts) != table.num_rows:
        raise ValueError(f"{len(counts)} redaction counts for {table.num_rows} rows")
    # whether redaction broke a code row is read off the row itself: the sidecar holds counts only
    rows = table.to_pylist()
    consistent = [
        not (found and _broken_by_placeholders(row)) for row, found in zip(rows, counts, strict=True)
    ]
    out = _decide(table, counts, consistent, config, stats=stats, dropped=dropped_mask(table))
    return out, stats


_PLACEHOLDER = re.compile(r"<[A-Z][A-Z_]*?(?:_\d+)?>")


def _broken_by_placeholders(row: dict[str, Any]) -> bool:
    """A redacted code row whose code does not parse but would with its placeholders put back as a
    literal (``return <CREDIT_CARD>`` where the seed had an int): redaction broke it. Code that did
    not parse for other reasons is not redaction's doing."""
    texts = (_code_texts(row) or {}).values()
    return any(
        text and _PLACEHOLDER.search(text) and not parses(text) and parses(_PLACEHOLDER.sub("0", text))
        for text in texts
    )


def _decide(
    out: pa.Table,
    counts: list[dict[str, int]],
    consistent: list[bool],
    config: PrivacyConfig,
    *,
    stats: PrivacyStats,
    dropped: pa.Array,
) -> pa.Table:
    live = np.flatnonzero(~dropped.to_numpy(zero_copy_only=False)).tolist()
    rows, verdicts, reasons, details = [], [], [], []
    for i in live:
        if not counts[i]:
            continue
        rows.append(i)
        details.append(json.dumps(counts[i], sort_keys=True, separators=(",", ":")))
        if config.action == "drop":
            verdicts.append("drop")
            reasons.append("personal_data")
        elif not consistent[i]:
            verdicts.append("route")
            reasons.append("redaction_breaks_code")
        elif config.action == "review":
            verdicts.append("route")
            reasons.append("personal_data")
        else:
            verdicts.append("keep")
            reasons.append("redacted")
        stats.found.update(counts[i])
    stats.rows_with_findings += len(rows)
    stats.routed += verdicts.count("route")
    stats.dropped += verdicts.count("drop")
    return add_decision(out, STAGE, verdicts, reasons, details, rows=rows) if rows else out


def redact_seed(
    task: dict[str, Any], config: PrivacyConfig | None = None
) -> tuple[dict[str, Any], dict[str, int]]:
    """A seed task (the dict read from a seed file) with every text field redacted, and the counts.
    ``id``, ``kind`` and ``entry_point`` are left alone; a code task's tests decide its test data."""
    config = config or PrivacyConfig()
    if not config.enabled:
        return task, {}
    code = None
    if task.get("kind") == "code":
        prompt = "\n\n".join(t for t in (task.get("instruction"), task.get("input")) if t)
        tests = tests_text(task.get("tests"))  # MBPP's list of assert lines is one program
        code = _code(prompt, task.get("response") or "", task.get("entry_point") or "",
                     tests if isinstance(tests, str) else None)  # fmt: skip
    cleaned, counts, _ = redact_record(task, config, skip=_SEED_SKIP, code=code, numbers=True)
    return cleaned, counts
