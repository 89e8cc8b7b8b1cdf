"""``ptf datasets gc``: remove what publishers that died left behind, once it is older than a grace period.

On an object store (see ``storage.commit``) that is

- ``staging``: ``<name>/.staging/<attempt>/``, the shards of a publish that never claimed a
  version or never finished (aged by its newest object);
- ``uncommitted``: a ``v<N>/`` without ``manifest.json``, claimed or not (aged by its newest
  object and its claim). Before removing it, gc marks ``v<N>`` abandoned
  (``.claims/v<N>.abandoned.json``, a conditional create), so the number is never reused and a
  publisher that was only stalled refuses to commit it.

On a local disk, hidden ``.tmp-v<N>-*`` folders of dead publishers (the next publish removes them
too). Committed versions are never touched. The grace period is what keeps gc away from a publish
still in progress: make it longer than any publish takes (default one hour).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from ptfactory.errors import UserInputError
from ptfactory.storage.commit import CLAIM_RE, Layout, owner_record
from ptfactory.storage.manifest import MANIFEST_FILE
from ptfactory.storage.objectstore import ObjectOps, object_ops
from ptfactory.storage.refs import VERSION_RE

if TYPE_CHECKING:
    from ptfactory.storage.versions import DatasetStore

__all__ = ["Leftover", "collect_garbage", "parse_grace"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Leftover:
    dataset: str
    kind: str  # "staging" | "uncommitted" | "temp"
    path: str
    files: int
    age_s: float
    owner: str  # who claimed it (host, pid), where known

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_grace(text: str) -> float:
    """``"0"``, ``"90s"``, ``"15m"``, ``"1h"``, ``"2d"`` → seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise UserInputError(f"--grace {text!r} is not a duration; write e.g. 0, 90s, 15m, 1h or 2d")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def collect_garbage(datasets: DatasetStore, grace_s: float, *, dry_run: bool = False) -> list[Leftover]:
    """Every leftover older than ``grace_s`` seconds, removed unless ``dry_run``."""
    names = datasets.names()
    found: list[Leftover] = []
    if datasets.store.local:
        for name in names:
            found += _local(datasets, name, grace_s, dry_run)
        return found
    ops = object_ops(datasets.store, datasets.state_dir)
    for name in names:
        layout = Layout(datasets.store, name)
        found += _staging(ops, layout, grace_s, dry_run)
        found += _uncommitted(ops, layout, grace_s, dry_run)
    return found


def _staging(ops: ObjectOps, layout: Layout, grace_s: float, dry_run: bool) -> list[Leftover]:
    attempts: dict[str, list[float]] = {}
    for key, info in ops.listing(layout.staging_root).items():
        attempts.setdefault(key.split("/", 1)[0], []).append(info.modified)
    found = []
    now = time.time()
    for attempt, stamps in sorted(attempts.items()):
        age = now - max(stamps)
        if age < grace_s:
            continue
        path = layout.staging(attempt)
        found.append(Leftover(layout.name, "staging", path, len(stamps), round(age, 1), ""))
        if not dry_run:
            ops.delete_prefix(path)
    return found


def _uncommitted(ops: ObjectOps, layout: Layout, grace_s: float, dry_run: bool) -> list[Leftover]:
    store = layout.store
    claims = ops.listing(layout.claims)
    claimed = {
        int(m.group(1)): info for k, info in claims.items() if (m := CLAIM_RE.match(k)) and not m.group(2)
    }
    given_up = {int(m.group(1)) for k in claims if (m := CLAIM_RE.match(k)) and m.group(2)}
    folders = {int(m.group(1)) for e in store.listdir(layout.base) if (m := VERSION_RE.match(e))}
    found = []
    now = time.time()
    for number in sorted(folders | claimed.keys()):
        final = layout.version(number)
        if store.exists(posixpath.join(final, MANIFEST_FILE)):
            continue  # committed: never touched
        files = ops.listing(final) if number in folders else {}
        if number in given_up and not files:
            continue  # already collected
        stamps = [i.modified for i in files.values()] + (
            [claimed[number].modified] if number in claimed else []
        )
        age = now - max(stamps)
        if age < grace_s:
            continue
        owner = _owner(ops, layout, number) if number in claimed else "unclaimed"
        found.append(Leftover(layout.name, "uncommitted", final, len(files), round(age, 1), owner))
        if dry_run:
            continue
        ops.create_exclusive(layout.abandoned(number), owner_record(by="ptf datasets gc", grace_s=grace_s))
        if store.exists(posixpath.join(final, MANIFEST_FILE)):
            continue  # committed after all, just now: the mark only keeps the number from reuse
        ops.delete(posixpath.join(final, key) for key in files)
    return found


def _owner(ops: ObjectOps, layout: Layout, number: int) -> str:
    raw = ops.read(layout.claim(number))
    if raw is None:
        return "unknown"
    body = json.loads(raw)
    return f"{body.get('host')} pid {body.get('pid')} at {body.get('at')}"


def _local(datasets: DatasetStore, name: str, grace_s: float, dry_run: bool) -> list[Leftover]:
    base = datasets.store.path(name)
    temps = [e for e in datasets.store.listdir(base) if e.startswith(".tmp-")]
    if not temps:
        return []
    lock = FileLock(posixpath.join(base, ".publish.lock"))
    try:
        lock.acquire(timeout=0)  # a publish holds it: its own temp dir is live, and it cleans the rest
    except Timeout:
        return []
    found = []
    try:
        now = time.time()
        for entry in temps:
            path = posixpath.join(base, entry)
            age = now - os.path.getmtime(path)
            if age < grace_s:
                continue
            files = sum(len(f) for _, _, f in os.walk(path))
            found.append(Leftover(name, "temp", path, files, round(age, 1), ""))
            if not dry_run:
                datasets.store.remove(path, recursive=True)
    finally:
        lock.release()
    return found
