"""Dataset references (``NAME@VERSION``) and dataset names: what is allowed, and the error when not."""

from __future__ import annotations

import re

from ptfactory.errors import DatasetRefError, PublishError

__all__ = ["NAME_RE", "VERSION_RE", "check_name", "parse_ref"]

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
VERSION_RE = re.compile(r"^v([1-9][0-9]*)$")


def parse_ref(ref: str) -> tuple[str, str]:
    """``"sft@v3"`` → ``("sft", "v3")``; a bare name means ``latest``."""
    name, _, version = ref.partition("@")
    version = version or "latest"
    if not NAME_RE.match(name):
        raise DatasetRefError(
            f"{ref!r} is not a dataset reference; write NAME@VERSION, e.g. sft@v3, sft@latest or sft@stable"
        )
    return name, version


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise PublishError(
            f"dataset name {name!r} is not allowed; use letters, digits, '_', '-' or '.' (max 64)"
        )
    return name
