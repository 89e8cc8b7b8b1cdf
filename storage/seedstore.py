"""Seed files copied into the factory, one folder per batch, so a batch can be rerun from the UI.

What is copied is what the caller gives: ``ptf run`` and the inbox schedule give each file with its
personal data and secrets redacted (``filters.privacy.seedfiles``), so no staged copy holds a raw
value; the record of a batch hashes the files as the user gave them.

``PTF_HOME/seeds/<batch>/<file>``: the batch name is derived from the content, so staging
the same seeds twice gives the same batch (and an idempotent rerun). A name the user picks
(``ptf run --batch``) must match :data:`BATCH_PATTERN` (it is a folder, a Dagster partition and an
asset file name, none of which may escape or collide), and a batch holds one set of seeds: the
same name with other content is refused, never run on the old copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shlex
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ptfactory.errors import UserInputError
from ptfactory.home import ptf_home
from ptfactory.storage.fs import Store

__all__ = ["BATCH_PATTERN", "BATCH_RULE", "SeedStore", "batch_name", "check_batch_name"]

_SAFE = re.compile(r"[^A-Za-z0-9_-]+")
# A batch name is a path segment, a partition key and (unchanged: ``AssetStore`` maps nothing this
# pattern allows) an asset file name: it starts with a letter or digit, so no `.`/`..`, no hidden
# or option-like name, and no `__all__` (the unpartitioned assets' file).
BATCH_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
BATCH_RULE = "1-100 characters: letters, digits, '.', '_' and '-', starting with a letter or digit"
# What a batch was staged with, written before its files: {file name: sha256}
_RECORD = ".seeds.json"


def check_batch_name(batch: str) -> str:
    """``batch`` if it is a valid batch name, else :class:`UserInputError` naming the rule."""
    if not BATCH_PATTERN.match(batch):
        raise UserInputError(f"batch name {batch!r} is not allowed: use {BATCH_RULE} (e.g. 2025-06-01.math)")
    return batch


def batch_name(files: list[Path], root: Path) -> str:
    """``<stem>-<8 hex of the content>``, e.g. ``demo-3fa81c02``."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(root) if file != root else file.name).encode())
        digest.update(b"\0")
        digest.update(file.read_bytes())
    stem = _SAFE.sub("-", root.stem if root.is_file() else root.name).strip("-_")[:40] or "seeds"
    return f"{stem}-{digest.hexdigest()[:8]}"


def _digests(files: list[Path]) -> dict[str, str]:
    return {file.name: hashlib.sha256(file.read_bytes()).hexdigest() for file in files}


class SeedStore:
    def __init__(self, home: str | None = None) -> None:
        self.store = Store(posixpath.join(home or ptf_home(), "seeds"))

    def stage(
        self,
        files: list[Path],
        batch: str,
        contents: Mapping[str, bytes] | None = None,
        extra: Mapping[str, bytes] | None = None,
    ) -> str:
        """Copy ``files`` into the batch folder (atomically, once); returns the folder.

        ``contents``: what to write in place of a file's bytes, by file name (its redacted copy:
        ``filters.privacy.seedfiles``); ``extra``: hidden files written beside them (a name
        starting with ``.``: the redaction counts). The batch's record hashes the files as given,
        so the same files again (a rerun, or a run that died while staging) are a resume; other
        content under a name already staged raises :class:`UserInputError` saying what differs."""
        check_batch_name(batch)
        directory = self.store.path(batch)
        wanted = _digests(files)
        self.check(files, batch, wanted)
        record = posixpath.join(directory, _RECORD)
        if not self.store.exists(record):
            self._record(record, wanted)
            self.check(files, batch, wanted)  # another run recorded other seeds first
        for name, body in (extra or {}).items():
            if not name.startswith(".") or "/" in name:
                raise ValueError(f"extra seed-folder file {name!r} must be a hidden file name")
            target = posixpath.join(directory, name)
            if not self.store.exists(target):
                self.store.write_bytes_atomic(target, body)
        for file in files:
            target = posixpath.join(directory, file.name)
            if not self.store.exists(target):
                body = contents[file.name] if contents and file.name in contents else file.read_bytes()
                self.store.write_bytes_atomic(target, body)
        return directory

    def check(self, files: list[Path], batch: str, wanted: dict[str, str] | None = None) -> None:
        """Raise :class:`UserInputError` (nothing written) if ``batch`` was staged with other seeds."""
        check_batch_name(batch)
        wanted = wanted if wanted is not None else _digests(files)
        held = self.staged(batch)
        if held is None or held == wanted:
            return
        differs = [
            f"{name} differs (staged sha256 {held[name][:12]}, given {wanted[name][:12]})"
            for name in sorted(set(held) & set(wanted))
            if held[name] != wanted[name]
        ]
        differs += [f"{name} is staged but not given" for name in sorted(set(held) - set(wanted))]
        differs += [f"{name} is given but not staged" for name in sorted(set(wanted) - set(held))]
        directory = self.store.path(batch)
        remove = f"rm -r {shlex.quote(directory)}" if self.store.local else f"remove {directory}/"
        raise UserInputError(
            f"batch {batch!r} already holds other seeds: {'; '.join(differs)}. A batch runs the seeds "
            f"it was first given: pick a new name (another --batch, or none for one made from the "
            f"content), or to replace the batch's seeds remove them first ({remove}) and run again"
        )

    def staged(self, batch: str) -> dict[str, str] | None:
        """The seed files ``batch`` holds, by name and sha256; None if nothing is staged."""
        directory = self.store.path(batch)
        record = posixpath.join(directory, _RECORD)
        if self.store.exists(record):
            body = json.loads(self.store.read_bytes(record))
            return {str(k): str(v) for k, v in body["files"].items()}
        names = [n for n in self.store.listdir(directory) if not n.startswith(".")]
        if not names:
            return None
        # staged before the record existed (and before seeds were redacted when staged): the files
        # themselves say what the batch holds
        return {
            name: hashlib.sha256(self.store.read_bytes(posixpath.join(directory, name))).hexdigest()
            for name in names
        }

    def _record(self, record: str, wanted: dict[str, str]) -> None:
        body = (json.dumps({"files": wanted}, indent=2, sort_keys=True) + "\n").encode()
        if not self.store.local:
            self.store.write_bytes_atomic(record, body)
            return
        # an exclusive create: of two runs staging one new name, the second sees the first's record
        self.store.makedirs(posixpath.dirname(record))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=posixpath.dirname(record))
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, record)
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)

    def exists(self, batch: str) -> bool:
        return bool(self.store.listdir(self.store.path(batch)))

    def local_dir(self, batch: str) -> Path:
        """A local folder holding the batch's seed files (downloaded when PTF_HOME is remote)."""
        directory = self.store.path(batch)
        if self.store.local:
            return Path(directory)
        local = Path(tempfile.mkdtemp(prefix=f"ptf-seeds-{batch}-"))
        for name in self.store.listdir(directory):
            if not name.startswith(".tmp-"):
                (local / name).write_bytes(self.store.read_bytes(posixpath.join(directory, name)))
        return local
