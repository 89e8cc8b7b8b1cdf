"""Aliases (``stable`` -> v3): one small JSON file per dataset, ``aliases.json``, with a history.

On a local home the file is rewritten atomically under the dataset's lock. An object store has
no lock that machines share, so there the file is swapped with a conditional put on the version
that was read (``ObjectOps.replace``: S3's ``If-Match`` on the ETag); a writer that lost the race
reads the new file and applies its move again, so no move is lost.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import time
from collections.abc import Callable
from typing import Any

from ptfactory.errors import PublishError
from ptfactory.storage.objectstore import ObjectOps

__all__ = ["ALIASES_FILE", "moved", "swap"]

ALIASES_FILE = "aliases.json"
_ATTEMPTS = 100


def moved(current: bytes | None, alias: str, version: int) -> tuple[bytes, int | None, dict[str, int]]:
    """The file with ``alias`` pointing at ``version``: (new bytes, the previous version, all aliases)."""
    body: dict[str, Any] = json.loads(current) if current else {"aliases": {}, "history": []}
    previous = body["aliases"].get(alias)
    body["aliases"][alias] = version
    body["history"].append(
        {
            "alias": alias,
            "version": version,
            "previous": previous,
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    )
    aliases = {k: int(v) for k, v in body["aliases"].items()}
    return (json.dumps(body, indent=2) + "\n").encode(), previous, aliases


def swap(
    ops: ObjectOps, path: str, change: Callable[[bytes | None], tuple[bytes, int | None, dict[str, int]]]
) -> tuple[int | None, dict[str, int]]:
    """Apply ``change`` to the object at ``path`` by compare-and-swap, retried until it lands."""
    for attempt in range(_ATTEMPTS):
        current, tag = ops.read_tagged(path)
        data, previous, aliases = change(current)
        if ops.replace(path, data, tag):
            return previous, aliases
        time.sleep(random.uniform(0, 0.02 * 2 ** min(attempt, 6)))  # jittered: racing writers spread out
    raise PublishError(f"{path} kept changing under `ptf datasets tag` ({_ATTEMPTS} tries); try again")
