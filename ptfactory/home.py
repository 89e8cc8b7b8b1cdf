"""Where the factory keeps its state.

``PTF_HOME`` (default ``<project>/.ptf``) holds datasets, the asset store and seed
copies; it may be any fsspec URL. Things that must be local files (the DuckDB
catalog, the response cache, model folders, server venvs) live in
:func:`local_state_dir`, which is ``PTF_HOME`` when that is local.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["find_project", "is_local_url", "local_state_dir", "project_root", "ptf_home"]

_MARKERS = ("dagster.yaml", "factory.yaml")


def find_project(start: Path | None = None) -> Path | None:
    """The nearest directory at or above ``start`` (default: cwd) holding dagster.yaml or factory.yaml."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if any((candidate / marker).is_file() for marker in _MARKERS):
            return candidate
    return None


def project_root(start: Path | None = None) -> Path:
    """:func:`find_project`, falling back to ``start`` itself (a library used from a notebook works
    in any folder; the ``ptf`` CLI refuses to run outside a project instead)."""
    here = (start or Path.cwd()).resolve()
    return find_project(here) or here


def is_local_url(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


def ptf_home() -> str:
    """``$PTF_HOME`` if set, else ``<project>/.ptf``; local paths come back absolute."""
    value = os.environ.get("PTF_HOME", "").strip()
    if not value:
        return str(project_root() / ".ptf")
    if is_local_url(value):
        return str(Path(value.removeprefix("file://")).expanduser().resolve())
    return value.rstrip("/")


def local_state_dir() -> Path:
    """A local directory for files that cannot live on object storage."""
    home = ptf_home()
    path = Path(home) if is_local_url(home) else project_root() / ".ptf"
    path.mkdir(parents=True, exist_ok=True)
    return path
