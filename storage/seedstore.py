"""Seed files copied into the factory, one folder per batch, so a batch can be rerun from the UI.

``PTF_HOME/seeds/<batch>/<file>``: the batch name is derived from the content, so staging
the same seeds twice gives the same batch (and an idempotent rerun).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import tempfile
from pathlib import Path

from ptfactory.home import ptf_home
from ptfactory.storage.fs import Store

__all__ = ["SeedStore", "batch_name"]

_SAFE = re.compile(r"[^A-Za-z0-9_-]+")


def batch_name(files: list[Path], root: Path) -> str:
    """``<stem>-<8 hex of the content>``, e.g. ``demo-3fa81c02``."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(root) if file != root else file.name).encode())
        digest.update(b"\0")
        digest.update(file.read_bytes())
    stem = _SAFE.sub("-", root.stem if root.is_file() else root.name).strip("-")[:40] or "seeds"
    return f"{stem}-{digest.hexdigest()[:8]}"


class SeedStore:
    def __init__(self, home: str | None = None) -> None:
        self.store = Store(posixpath.join(home or ptf_home(), "seeds"))

    def stage(self, files: list[Path], batch: str) -> str:
        """Copy ``files`` into the batch folder (atomically, once); returns the folder."""
        directory = self.store.path(batch)
        for file in files:
            target = posixpath.join(directory, file.name)
            if not self.store.exists(target):
                self.store.write_bytes_atomic(target, file.read_bytes())
        return directory

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
