"""Publishing a version on an object store: stage, audit, claim, copy, commit.

An object store has no rename and no lock, so a version is made visible in steps, each either
invisible to readers or atomic::

    <name>/.staging/<attempt>/*.parquet   1. shards uploaded under a prefix of this attempt's own;
                                             readers never look there. The audit reads them back.
    <name>/.claims/v<N>.json              2. v<N> claimed by a conditional create (attempt, host,
                                             pid, time). A publisher that loses the claim takes
                                             N+1 and never touches v<N>/.
    <name>/v<N>/*.parquet, README.md      3. the winner copies its staged shards in (server-side
                                             copies) and writes the dataset card.
    <name>/v<N>/manifest.json             4. the commit: a conditional create, last. ``versions()``
                                             lists only versions whose manifest exists.

So a committed ``v<N>/`` holds exactly its manifest's files, and ``v<N>/*.parquet`` and the card
keep working for readers. A publisher that fails (an exception) removes its staging, its copies
and its claim. One killed between 2 and 4 leaves a claimed ``v<N>/`` without a manifest: never
visible, never written by anyone else; ``ptf datasets gc`` removes it (and abandoned staging)
once older than a grace period, marking ``v<N>`` abandoned so the number is never reused.

The parent of a version is the newest version committed when it is claimed; one still being
copied at that moment is not waited for, so two racing publishes may name the same parent.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import posixpath
import re
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ptfactory.errors import PublishError
from ptfactory.storage.manifest import MANIFEST_FILE, Manifest, render_card
from ptfactory.storage.objectstore import ObjectOps, object_ops
from ptfactory.storage.refs import VERSION_RE
from ptfactory.storage.seams import SEAM_ENV, seam  # a test stops a publish at a named point
from ptfactory.storage.shards import ShardInfo
from ptfactory.storage.staging import (
    PublishResult,
    Request,
    StagedShards,
    audit_staged,
    build_manifest,
    same_as,
)

if TYPE_CHECKING:
    from ptfactory.storage.fs import Store
    from ptfactory.storage.versions import DatasetStore

__all__ = ["CLAIMS_DIR", "CLAIM_RE", "SEAM_ENV", "STAGING_DIR", "Layout", "publish_to_object_store"]

STAGING_DIR = ".staging"
CLAIMS_DIR = ".claims"
CLAIM_RE = re.compile(r"^v([1-9][0-9]*)(\.abandoned)?\.json$")
CARD_FILE = "README.md"
_MAX_CLAIMS = 1000
_MAX_REBASES = 20
_SETTLE_S = 120.0  # how long a change waits for a version claimed below it to commit


@dataclass(frozen=True)
class Layout:
    """Where one dataset's staging, claims and versions live on the store."""

    store: Store
    name: str

    @property
    def base(self) -> str:
        return self.store.path(self.name)

    @property
    def staging_root(self) -> str:
        return self.store.path(self.name, STAGING_DIR)

    @property
    def claims(self) -> str:
        return self.store.path(self.name, CLAIMS_DIR)

    def staging(self, attempt: str) -> str:
        return self.store.path(self.name, STAGING_DIR, attempt)

    def claim(self, number: int) -> str:
        return self.store.path(self.name, CLAIMS_DIR, f"v{number}.json")

    def abandoned(self, number: int) -> str:
        return self.store.path(self.name, CLAIMS_DIR, f"v{number}.abandoned.json")

    def version(self, number: int) -> str:
        return self.store.path(self.name, f"v{number}")

    def taken(self, ops: ObjectOps) -> set[int]:
        """Every version number in use: committed, being copied, claimed, or abandoned."""
        found = {int(m.group(1)) for e in self.store.listdir(self.base) if (m := VERSION_RE.match(e))}
        found |= {int(m.group(1)) for k in ops.listing(self.claims) if (m := CLAIM_RE.match(k))}
        return found


def owner_record(**extra: Any) -> bytes:
    """Who wrote a claim or an abandoned mark: host, pid and time, for `ptf datasets gc` to show."""
    body = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **extra,
    }
    return (json.dumps(body, indent=2) + "\n").encode()


class _Taken(Exception):
    """Someone else holds what this attempt's claim should have made its own: touch nothing."""


def _quietly(action: Callable[[], Any]) -> None:
    """Best-effort cleanup: a failure here must not hide the error being handled (gc finishes it)."""
    try:
        action()
    except Exception:
        pass


def publish_to_object_store(datasets: DatasetStore, request: Request) -> PublishResult:
    ops = object_ops(datasets.store, datasets.state_dir)
    layout = Layout(datasets.store, request.name)
    latest = _latest_committed(layout)
    # One attempt id for the whole publish: the claim names it, and a change that rebases keeps
    # its claim (see below), so the claim and the staging it commits must agree across tries.
    attempt = uuid.uuid4().hex
    staging = layout.staging(attempt)
    held: int | None = None  # the version number this publish has claimed, once it has
    for _ in range(_MAX_REBASES):
        parent = datasets.manifest(request.name, latest) if latest is not None else None
        try:
            staged = request.stage(
                datasets.store,
                staging,
                parent=parent,
                parent_dir=layout.version(parent.version) if parent is not None else None,
                place=_copier(ops, layout, parent),
                after_split=lambda split: seam(f"staging:{split}"),
            )
            if (
                parent is not None
                and not request.force
                and same_as(parent, staged.shards, request.config_hash)
            ):
                ops.delete_prefix(staging)
                if held is not None:
                    ops.delete([layout.claim(held)])
                return PublishResult(parent, layout.version(parent.version), created=False)
            number = held if held is not None else max(layout.taken(ops), default=0) + 1
            checks = audit_staged(request, datasets.store, staging, version=number, staged=staged)
            seam("staged")
            if held is None:
                number = held = _claim(ops, layout, number, attempt)
            if request.over_base:
                # A change (staged as a delta, or in full where it changes the layout) is over its
                # base: a version committed in between must go under it. It keeps its claim while
                # it stages again: once nothing below the claim is still being copied, nothing new
                # lands below it (claims only go up); a claim given back would leave a hole.
                settled = _settled_below(ops, layout, number)
                if settled != latest:
                    ops.delete_prefix(staging)
                    latest = settled
                    continue
        except BaseException:
            _quietly(functools.partial(ops.delete_prefix, staging))
            if held is not None:
                _quietly(functools.partial(ops.delete, [layout.claim(held)]))
            raise
        return _finish(
            datasets,
            ops,
            layout,
            request=request,
            attempt=attempt,
            number=number,
            staged=staged,
            checks=checks,
        )
    _quietly(functools.partial(ops.delete, [layout.claim(held)] if held is not None else []))
    raise PublishError(
        f"{request.name}: other versions kept committing while this change was staged "
        f"({_MAX_REBASES} tries); publish it again"
    )


def _finish(
    datasets: DatasetStore,
    ops: ObjectOps,
    layout: Layout,
    *,
    request: Request,
    attempt: str,
    number: int,
    staged: StagedShards,
    checks: dict[str, Any],
) -> PublishResult:
    staging = layout.staging(attempt)
    try:
        manifest = _commit(
            datasets,
            ops,
            layout,
            request=request,
            attempt=attempt,
            number=number,
            staged=staged,
            checks=checks,
        )
    finally:
        _quietly(lambda: ops.delete_prefix(staging))
    final = layout.version(number)
    datasets._register(manifest, final, staged)
    return PublishResult(manifest, final, created=True)


def _copier(
    ops: ObjectOps, layout: Layout, parent: Manifest | None
) -> Callable[[ShardInfo, str], None] | None:
    """Stage a parent's unchanged shard by a server-side copy from its ``v<N>/`` (no upload)."""
    if parent is None:
        return None
    source = layout.version(parent.version)
    return lambda old, dest: ops.copy(posixpath.join(source, old.file), dest, old.bytes)


def _latest_committed(layout: Layout, below: int | None = None) -> int | None:
    """The newest version (under ``below``) whose manifest exists: one listing and usually one HEAD."""
    folders = sorted(
        (int(m.group(1)) for e in layout.store.listdir(layout.base) if (m := VERSION_RE.match(e))),
        reverse=True,
    )
    for number in folders:
        if (below is None or number < below) and layout.store.exists(
            posixpath.join(layout.version(number), MANIFEST_FILE)
        ):
            return number
    return None


def _settled_below(ops: ObjectOps, layout: Layout, number: int) -> int | None:
    """The newest version committed below ``number``, once no version below it is still being
    copied (claimed, not committed, not given up by gc): a change must not skip one that lands later."""
    deadline = time.monotonic() + _SETTLE_S
    while True:
        names = [m for k in ops.listing(layout.claims) if (m := CLAIM_RE.match(k))]
        given_up = {int(m.group(1)) for m in names if m.group(2)}
        pending = sorted(
            n
            for n in {int(m.group(1)) for m in names if not m.group(2)}
            if n < number
            and n not in given_up
            and not layout.store.exists(posixpath.join(layout.version(n), MANIFEST_FILE))
        )
        if not pending:
            return _latest_committed(layout, below=number)
        if time.monotonic() > deadline:
            raise PublishError(
                f"{layout.name}: v{min(pending)} has been claimed but not committed for {_SETTLE_S:.0f} s; "
                "this change must go on top of it. If its publisher died, `ptf datasets gc` gives it up"
            )
        time.sleep(0.1)


def _claim(ops: ObjectOps, layout: Layout, number: int, attempt: str) -> int:
    """Claim the first free version number from ``number`` on; returns the one this attempt holds."""
    for _ in range(_MAX_CLAIMS):
        if ops.create_exclusive(layout.claim(number), owner_record(attempt=attempt, version=number)):
            return number
        number = max(number + 1, max(layout.taken(ops), default=0) + 1)
    raise PublishError(
        f"{layout.name}: no free version number after {_MAX_CLAIMS} claims; is the store sane?"
    )


def _commit(
    datasets: DatasetStore,
    ops: ObjectOps,
    layout: Layout,
    *,
    request: Request,
    attempt: str,
    number: int,
    staged: StagedShards,
    checks: dict[str, Any],
) -> Manifest:
    """Copy the staged shards into the claimed ``v<number>/`` and create its manifest, last."""
    shards = staged.shards
    final = layout.version(number)
    manifest_path = posixpath.join(final, MANIFEST_FILE)
    body: bytes | None = None
    try:
        latest = _latest_committed(layout, below=number)  # what committed while this one staged
        parent = datasets.manifest(request.name, latest) if latest is not None else None
        added_removed = datasets._diff(parent, staged)
        manifest = build_manifest(
            request, number, parent, staged=staged, checks=checks, added_removed=added_removed
        )
        body = manifest.to_json().encode()
        _copy_shards(ops, layout.staging(attempt), final, shards)
        ops.put(posixpath.join(final, CARD_FILE), render_card(manifest).encode())
        _check_before_commit(ops, layout, number, attempt, shards)
        if not ops.create_exclusive(manifest_path, body):
            raise _Taken(f"{final} was committed by another publisher despite this attempt's claim")
        return manifest
    except _Taken as exc:
        raise PublishError(
            f"{exc}; the store's conditional creates are not exclusive: stop publishing there"
        ) from exc
    except BaseException as exc:
        try:
            found = ops.read(manifest_path)
        except Exception:
            raise exc from None  # cannot tell whether the commit landed: leave it all for gc
        if body is not None and found == body and isinstance(exc, Exception):
            return manifest  # the commit landed though its reply was lost
        if found is None:
            _quietly(lambda: ops.delete_prefix(final))
            _quietly(lambda: ops.delete([layout.claim(number)]))
        raise


def _copy_shards(ops: ObjectOps, staging: str, final: str, shards: list[ShardInfo]) -> None:
    def copy(shard: ShardInfo) -> None:
        ops.copy(posixpath.join(staging, shard.file), posixpath.join(final, shard.file), shard.bytes)

    if os.environ.get(SEAM_ENV):  # one at a time, so a test can stop the publish after the k-th
        for index, shard in enumerate(shards, start=1):
            copy(shard)
            seam(f"copied:{index}")
        return
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(shards)))) as pool:
        list(pool.map(copy, shards))


def _check_before_commit(
    ops: ObjectOps, layout: Layout, number: int, attempt: str, shards: list[ShardInfo]
) -> None:
    """The claimed folder holds exactly the shards (right sizes) and the card; the claim is still
    this attempt's and `ptf datasets gc` has not given the version up (a publisher stalled past the
    grace period)."""
    final = layout.version(number)
    held = {k: v.size for k, v in ops.listing(final).items() if k != CARD_FILE}
    expected = {s.file: s.bytes for s in shards}
    if held != expected:
        odd = sorted(set(held) ^ set(expected)) or sorted(k for k in held if held[k] != expected[k])
        raise PublishError(
            f"{final} does not hold exactly the copied shards ({', '.join(odd)}); nothing committed"
        )
    if ops.read(layout.abandoned(number)) is not None:
        raise PublishError(
            f"{layout.name} v{number} was given up by `ptf datasets gc` while this publish copied it "
            "(it ran past the grace period); nothing committed, publish again"
        )
    claim = ops.read(layout.claim(number))
    if claim is None or json.loads(claim).get("attempt") != attempt:
        raise _Taken(f"the claim on {layout.name} v{number} is no longer this publish's")
