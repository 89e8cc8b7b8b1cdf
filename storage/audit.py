"""Write–audit–publish: checks that run on a staged version before anyone can see it.

``DatasetStore.publish(..., audit=Audit([...]))`` writes the shards to a staging place, reads
them back (verifying each shard's sha256), and hands the result to the audit as a
:class:`Staged` version. A failing *blocking* check raises :class:`AuditFailed`: nothing is
published, no alias moves, and the message names the check and the rows at fault. Results of
every check are kept in the manifest (``checks``) of the version that does get published.

The checks here need only the table; those that need dedup or a tokenizer are built above this
layer (``filters.dedup.leaks``, ``training.templates``) and passed in as plain callables.

A version staged by a delta publish (``DatasetStore.publish_delta``) carries a :class:`Delta`: the
rows it puts in over its parent, and a way to read any staged shard. A check whose result for the
parent holds for the rows the parent and the version share (schema, unique ids, a leak between two
unchanged rows, a template render) looks only at what changed, when the parent passed it; otherwise,
or for a check that ignores ``delta``, ``Staged.splits`` reads every staged row, as for a full
publish. Every blocking check keeps its guarantee either way.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ptfactory.errors import PublishError, SchemaError
from ptfactory.storage.fs import Store, parquet_from_bytes
from ptfactory.storage.manifest import Manifest
from ptfactory.storage.schema import validate_table
from ptfactory.storage.shards import ShardInfo, bucket_files

__all__ = [
    "CHECKS_METADATA_KEY",
    "Audit",
    "AuditFailed",
    "Check",
    "CheckResult",
    "Delta",
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
class Delta:
    """What a delta publish changed over ``parent``, and a reader of the staged version's shards."""

    parent: Manifest
    changed: Mapping[str, pa.Table]  # split -> the rows put in (their new content)
    removed: frozenset[str]  # ids the parent held that the version does not
    split_files: Mapping[str, list[str]]  # the staged version's
    shards: Mapping[str, ShardInfo]  # staged file -> its shard
    replaced: Mapping[str, ShardInfo | None]  # rewritten file -> the parent's shard of that bucket
    buckets: Mapping[str, int]
    read: Callable[..., pa.Table]  # (file, columns=None) -> a staged shard's rows
    schemas: Mapping[str, pa.Schema] = field(default_factory=dict)  # rewritten file -> its schema

    def passed(self, check: str, **detail: Any) -> bool:
        """Whether the parent passed ``check`` (with these values in its detail, e.g. the settings)."""
        body = self.parent.checks.get(check) or {}
        recorded = body.get("detail") or {}
        return body.get("passed") is True and all(recorded.get(k) == v for k, v in detail.items())

    @property
    def changed_rows(self) -> int:
        return sum(t.num_rows for t in self.changed.values())

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards.values())

    def holding(self, ids: pa.Array | pa.ChunkedArray) -> dict[str, list[str]]:
        """Per split, the staged shards of the buckets ``ids`` fall in: where any copy of them is."""
        return {
            split: bucket_files(ids, list(files), self.buckets[split])
            for split, files in self.split_files.items()
        }


class _Splits(Mapping[str, pa.Table]):
    """Every staged row by split, read on first use: what a check that ignores ``delta`` sees."""

    def __init__(self, delta: Delta) -> None:
        self.delta = delta
        self.loaded: dict[str, pa.Table] = {}

    def __getitem__(self, split: str) -> pa.Table:
        if split not in self.delta.split_files:
            raise KeyError(split)
        if split not in self.loaded:
            self.loaded[split] = pa.concat_tables([self.delta.read(f) for f in self.delta.split_files[split]])
        return self.loaded[split]

    def __iter__(self) -> Iterator[str]:
        return iter(self.delta.split_files)

    def __len__(self) -> int:
        return len(self.delta.split_files)


@dataclass(frozen=True)
class Staged:
    """A version written but not yet visible: its splits as read back from the staged shards."""

    name: str
    version: int
    kind: str
    batches: tuple[str, ...]
    splits: Mapping[str, pa.Table]
    delta: Delta | None = None  # set when the version was staged as a change over its parent

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
    delta: Delta | None = None,
) -> dict[str, Any]:
    """Read the staged shards in ``work`` back (verifying each sha256), run ``audit`` on them, and
    return every result for the manifest; raise :class:`AuditFailed` if a blocking check fails.

    With a ``delta`` whose parent passed ``shards_verified``, only the shards it rewrote are read
    back: the others are the parent's verified bytes (a hard link, a server-side copy of them)."""
    if delta is not None:
        return _run_delta(audit, store, work, staged, delta)
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


def _run_delta(audit: Audit, store: Store, work: str, staged: Staged, delta: Delta) -> dict[str, Any]:
    every = not delta.passed("shards_verified")
    files = list(delta.shards) if every else [f for f in delta.shards if f in delta.replaced]
    corrupt: list[str] = []
    schemas: dict[str, pa.Schema] = {}
    for file in files:
        data = store.read_bytes(posixpath.join(work, file))
        shard = delta.shards[file]
        if len(data) != shard.bytes or hashlib.sha256(data).hexdigest() != shard.sha256:
            corrupt.append(file)
        schemas[file] = pq.read_schema(pa.BufferReader(data))
    delta = replace(delta, schemas=schemas)
    staged = replace(staged, splits=_Splits(delta), delta=delta)
    verified = CheckResult(
        "shards_verified",
        not corrupt,
        detail={
            "shards": len(delta.shards),
            "corrupt": len(corrupt),
            "read_back": len(files),
            # the rest are the parent's shards, verified when it was published, linked or copied
            "reused": len(delta.shards) - len(files),
        },
        rows=tuple(corrupt),
    )
    results = [verified, *audit(staged)]
    failed = [r for r in results if r.blocking and not r.passed]
    if failed:
        raise AuditFailed(staged, failed, results)
    return {r.name: r.to_json() for r in results}


def schema_valid(staged: Staged) -> CheckResult:
    delta = staged.delta
    if delta is not None and delta.passed("schema_valid"):
        # the shared rows passed in the parent: the rows put in, and every rewritten shard's schema
        tables = [*delta.changed.values(), *(s.empty_table() for s in delta.schemas.values())]
        try:
            for table in tables:
                validate_table(table)
        except SchemaError as exc:
            return CheckResult("schema_valid", False, detail={"error": str(exc)})
        return CheckResult(
            "schema_valid", True, detail={"rows": delta.rows, "checked_rows": delta.changed_rows}
        )
    try:
        validate_table(staged.table)
    except SchemaError as exc:
        return CheckResult("schema_valid", False, detail={"error": str(exc)})
    return CheckResult("schema_valid", True, detail={"rows": staged.table.num_rows})


def unique_ids(staged: Staged) -> CheckResult:
    delta = staged.delta
    detail: dict[str, Any] = {}
    if delta is not None and delta.passed("unique_ids"):
        # An id always falls in the same bucket of a split, so a second copy of a changed id is in
        # its bucket of some split; two copies of an unchanged id would have failed the parent.
        changed = [t.column("sample_id") for t in delta.changed.values()]
        probe = pa.chunked_array(changed, pa.string())
        files = [f for held in delta.holding(probe).values() for f in held] if len(probe) else []
        ids = pa.chunked_array([delta.read(f, ["sample_id"]).column("sample_id") for f in files], pa.string())
        detail = {"rows": delta.rows, "checked_rows": len(ids)}
    else:
        ids = staged.table.column("sample_id")
        detail = {"rows": len(ids)}
    counts = pc.value_counts(ids)
    repeated = counts.filter(pc.greater(counts.field("counts"), 1))
    dupes = tuple(str(v) for v in repeated.field("values").to_pylist()[:_SHOWN])
    return CheckResult(
        "unique_ids",
        not len(repeated),
        detail={**detail, "repeated_ids": len(repeated)},
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
