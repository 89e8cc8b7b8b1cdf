"""Write–audit–publish: checks that run on a staged version before anyone can see it.

``DatasetStore.publish(..., audit=Audit([...]))`` writes the shards to a staging place, reads
them back (verifying each shard's sha256), and hands the result to the audit as a
:class:`Staged` version. A failing *blocking* check raises :class:`AuditFailed`: nothing is
published, no alias moves, and the message names the check and the rows at fault. Results of
every check are kept in the manifest (``checks``) of the version that does get published.

The checks here need only the table; those that need dedup or a tokenizer are built above this
layer (``filters.dedup.leaks``, ``training.templates``) and passed in as plain callables.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.errors import PublishError, SchemaError
from ptfactory.storage.fs import Store, parquet_from_bytes
from ptfactory.storage.schema import validate_table
from ptfactory.storage.shards import ShardInfo

__all__ = [
    "CHECKS_METADATA_KEY",
    "Audit",
    "AuditFailed",
    "Check",
    "CheckResult",
    "Staged",
    "batches_passed",
    "checks_from_metadata",
    "checks_metadata",
    "run_audit",
    "schema_valid",
    "unique_ids",
]

# where a stage output records the outcome of its own checks (Parquet schema metadata), so a
# publish can ask "did every batch in this version pass its judged_samples checks?" offline
CHECKS_METADATA_KEY = b"ptf.checks"
_SHOWN = 10  # rows named in a failure message


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    blocking: bool = True
    detail: Mapping[str, Any] = field(default_factory=dict)
    rows: tuple[str, ...] = ()  # sample ids at fault (the first few)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "blocking": self.blocking,
            "detail": dict(self.detail),
            "rows": list(self.rows),
        }

    def summary(self) -> str:
        rows = f"; rows: {', '.join(self.rows[:_SHOWN])}" if self.rows else ""
        detail = ", ".join(f"{k}={v}" for k, v in self.detail.items())
        return f"{self.name}: {detail or 'failed'}{rows}"


@dataclass(frozen=True)
class Staged:
    """A version written but not yet visible: its splits as read back from the staged shards."""

    name: str
    version: int
    kind: str
    batches: tuple[str, ...]
    splits: Mapping[str, pa.Table]

    @property
    def table(self) -> pa.Table:
        return pa.concat_tables(list(self.splits.values()))


Check = Callable[[Staged], CheckResult]


class AuditFailed(PublishError):
    exit_code = 2  # the rows given cannot be published as they are: fix the data, not the command

    def __init__(self, staged: Staged, failed: list[CheckResult], results: list[CheckResult]) -> None:
        self.failed = failed
        self.results = results  # every check's result, passed ones too
        names = ", ".join(c.name for c in failed)
        super().__init__(
            f"{staged.name} v{staged.version} was not published: blocking check(s) {names} failed on the "
            "staged version (no alias moved). " + " | ".join(c.summary() for c in failed)
        )


class Audit:
    """Checks run in order on a staged version; a check that raises counts as failed."""

    def __init__(self, checks: Iterable[Check]) -> None:
        self.checks = list(checks)

    def __call__(self, staged: Staged) -> list[CheckResult]:
        results = []
        for check in self.checks:
            try:
                results.append(check(staged))
            except Exception as exc:  # a check that cannot run must not wave the version through
                name = getattr(check, "check_name", getattr(check, "__name__", "check"))
                results.append(CheckResult(name, False, detail={"error": f"{type(exc).__name__}: {exc}"}))
        return results


def run_audit(
    audit: Audit,
    store: Store,
    work: str,
    staged: Staged,
    *,
    split_files: Mapping[str, list[str]],
    shards: list[ShardInfo],
) -> dict[str, Any]:
    """Read the staged shards in ``work`` back (verifying each sha256), run ``audit`` on them, and
    return every result for the manifest; raise :class:`AuditFailed` if a blocking check fails."""
    by_file = {s.file: s for s in shards}
    splits: dict[str, pa.Table] = {}
    corrupt: list[str] = []
    for split, files in split_files.items():
        parts = []
        for file in files:
            data = store.read_bytes(posixpath.join(work, file))
            shard = by_file[file]
            if len(data) != shard.bytes or hashlib.sha256(data).hexdigest() != shard.sha256:
                corrupt.append(file)
            parts.append(parquet_from_bytes(data))
        splits[split] = pa.concat_tables(parts)
    staged = replace(staged, splits=splits)
    verified = CheckResult(
        "shards_verified",
        not corrupt,
        detail={"shards": len(shards), "corrupt": len(corrupt)},
        rows=tuple(corrupt),
    )
    results = [verified, *audit(staged)]
    failed = [r for r in results if r.blocking and not r.passed]
    if failed:
        raise AuditFailed(staged, failed, results)
    return {r.name: r.to_json() for r in results}


def schema_valid(staged: Staged) -> CheckResult:
    try:
        validate_table(staged.table)
    except SchemaError as exc:
        return CheckResult("schema_valid", False, detail={"error": str(exc)})
    return CheckResult("schema_valid", True, detail={"rows": staged.table.num_rows})


def unique_ids(staged: Staged) -> CheckResult:
    ids = staged.table.column("sample_id")
    counts = pc.value_counts(ids)
    repeated = counts.filter(pc.greater(counts.field("counts"), 1))
    dupes = tuple(str(v) for v in repeated.field("values").to_pylist()[:_SHOWN])
    return CheckResult(
        "unique_ids",
        not len(repeated),
        detail={"rows": len(ids), "repeated_ids": len(repeated)},
        rows=dupes,
    )


def checks_metadata(results: Mapping[str, bool]) -> dict[bytes, bytes]:
    """Schema metadata recording a stage output's check outcomes (``{check: passed}``)."""
    return {CHECKS_METADATA_KEY: json.dumps(dict(results), sort_keys=True).encode()}


def checks_from_metadata(schema: pa.Schema) -> dict[str, bool] | None:
    """What :func:`checks_metadata` recorded; None for an output written before checks were kept."""
    raw = (schema.metadata or {}).get(CHECKS_METADATA_KEY)
    return {str(k): bool(v) for k, v in json.loads(raw).items()} if raw else None


def batches_passed(
    asset: str, lookup: Callable[[str], dict[str, bool] | None], blocking: Iterable[str]
) -> Check:
    """Every batch in the version passed ``asset``'s blocking checks (``lookup(batch)`` gives the
    outcomes it recorded). Non-blocking checks (a judge left out of the aggregate for counting
    too few votes) do not stop publishing; a batch that recorded nothing (written before outcomes
    were kept) is named in the detail, not failed."""
    required = list(blocking)

    def check(staged: Staged) -> CheckResult:
        failed: dict[str, list[str]] = {}
        unrecorded = []
        for batch in staged.batches:
            outcomes = lookup(batch)
            if outcomes is None:
                unrecorded.append(batch)
                continue
            bad = [name for name in required if outcomes.get(name) is False]
            if bad:
                failed[batch] = bad
        return CheckResult(
            f"{asset}_passed",
            not failed,
            detail={
                "batches": len(staged.batches),
                "failed": "; ".join(f"{b}: {', '.join(n)}" for b, n in failed.items()) or "none",
                "not_recorded": ", ".join(unrecorded) or "none",
            },
        )

    check.check_name = f"{asset}_passed"  # type: ignore[attr-defined]
    return check
