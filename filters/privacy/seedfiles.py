"""Seed files redacted before they are staged: the factory's copy of a batch's seeds holds no raw value.

``ptf run`` (and the inbox schedule) validate a seed file, then stage what :func:`redact_seed_files`
returns in place of the user's bytes: each row redacted by :func:`~.samples.redact_seed` (a JSONL
line stays on its line, a Parquet row in its place, so a redacted file reads as the original does),
and a sidecar, :data:`SIDECAR`, with each row's counts per type (never a value), which the
``seed_tasks`` asset turns into ``privacy`` decisions. A file with nothing to redact is staged as
given, byte for byte. The batch's record of what it was staged with hashes the user's files, so a
resume of the same file is recognised whatever the redaction made of it.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ptfactory.filters.privacy.config import PrivacyConfig
from ptfactory.filters.privacy.samples import redact_seed

__all__ = ["SIDECAR", "StagedSeeds", "read_sidecar", "redact_seed_files"]

SIDECAR = ".redactions.json"
FORMAT = "ptfactory.redactions/1"


@dataclass
class StagedSeeds:
    """What to stage: each file's bytes (by file name) and the sidecar's bytes."""

    contents: dict[str, bytes] = field(default_factory=dict)
    counts: dict[str, list[dict[str, int]]] = field(default_factory=dict)  # file -> per data row

    @property
    def found(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for rows in self.counts.values():
            for row in rows:
                for kind, count in row.items():
                    total[kind] = total.get(kind, 0) + count
        return total

    def sidecar(self) -> bytes:
        body = {"format": FORMAT, "files": self.counts}
        return (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _jsonl(data: bytes, config: PrivacyConfig) -> tuple[bytes, list[dict[str, int]]]:
    lines = data.split(b"\n")
    counts: list[dict[str, int]] = []
    out = []
    for number, raw in enumerate(lines):
        text = raw[3:] if number == 0 and raw.startswith(b"\xef\xbb\xbf") else raw
        if not text.strip():
            out.append(raw)
            continue
        row = json.loads(text.decode("utf-8"))  # validated before staging (generators.seeds)
        cleaned, found = redact_seed(row, config)
        counts.append(found)
        out.append(json.dumps(cleaned, ensure_ascii=False).encode() if found else raw)
    return b"\n".join(out), counts


def _parquet(data: bytes, config: PrivacyConfig) -> tuple[bytes, list[dict[str, int]]]:
    table = pq.read_table(pa.BufferReader(data))
    rows: list[dict[str, Any]] = []
    counts: list[dict[str, int]] = []
    for row in table.to_pylist():
        present = {k: v for k, v in row.items() if v is not None}
        cleaned, found = redact_seed(present, config)
        rows.append({**row, **cleaned})
        counts.append(found)
    if not any(counts):
        return data, counts
    # a numeric column where a value became a placeholder (an answer that was a phone number) is
    # written as text, its other numbers too: a seed's answer may be text
    schema = table.schema
    for at, column in enumerate(schema):
        numeric = pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
        if numeric and any(isinstance(row[column.name], str) for row in rows):
            schema = schema.set(at, column.with_type(pa.string()))
            for row in rows:
                row[column.name] = None if row[column.name] is None else str(row[column.name])
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink, compression="zstd")
    return sink.getvalue(), counts


def redact_seed_files(files: list[Path], config: PrivacyConfig | None = None) -> StagedSeeds:
    """The bytes to stage for each of ``files`` (validated seed files: .jsonl or .parquet) and each
    data row's redaction counts, in file order (blank JSONL lines are not rows)."""
    config = config or PrivacyConfig()
    staged = StagedSeeds()
    for file in files:
        data = file.read_bytes()
        if not config.enabled:
            staged.contents[file.name], staged.counts[file.name] = data, []
            continue
        redact = _parquet if file.suffix == ".parquet" else _jsonl
        staged.contents[file.name], staged.counts[file.name] = redact(data, config)
    return staged


def read_sidecar(folder: Path) -> dict[str, list[dict[str, int]]]:
    """What :func:`redact_seed_files` recorded for the seeds staged in ``folder`` (empty if none)."""
    path = folder / SIDECAR
    if not path.is_file():
        return {}
    body = json.loads(path.read_text(encoding="utf-8"))
    return {str(name): [dict(c) for c in rows] for name, rows in (body.get("files") or {}).items()}
