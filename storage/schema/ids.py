"""``sample_id``: the stable content hash of a sample."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

__all__ = ["sample_id"]


def sample_id(
    kind: str,
    messages: Sequence[Mapping[str, str]],
    *,
    chosen: Sequence[Mapping[str, str]] | None = None,
    rejected: Sequence[Mapping[str, str]] | None = None,
    tests: str | None = None,
    entry_point: str | None = None,
) -> str:
    """A stable content hash: the same content gives the same id on any machine, in any batch.

    Only content goes in (not batch, provenance or scores), so a sample generated twice
    is recognisably the same sample.
    """

    def turns(value: Sequence[Mapping[str, str]] | None) -> list[list[str]] | None:
        return None if value is None else [[m["role"], m["content"]] for m in value]

    payload = json.dumps(
        [kind, turns(messages), turns(chosen), turns(rejected), tests, entry_point],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).hexdigest()
