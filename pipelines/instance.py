"""Which Dagster instance a ``ptf`` command uses: the one that belongs to its ``PTF_HOME``.

Runs and partitions live in the instance, their outputs in the home. If two homes shared one
instance, a batch run against one home would be a partition the other home has no outputs for.
So the instance follows the home:

- the project's own home (``<project>/.ptf``, ``PTF_HOME`` unset): the project's ``dagster.yaml``
  as it is (its paths point into ``.ptf/dagster``), or a default one in ``.ptf/dagster``;
- any other local home: ``<home>/dagster``, with the project's ``dagster.yaml`` (queues, pools)
  whose local storage paths are moved into it;
- a home on object storage: ``<project>/.ptf/instances/<hash of the URL>`` the same way.

A ``DAGSTER_HOME`` set by the user wins: they chose the instance. PostgreSQL storage is kept as it
is (one database serves every home; give each home its own ``DAGSTER_HOME`` if that is not meant).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from ptfactory.home import is_local_url, ptf_home
from ptfactory.storage.fs import atomic_write_text

__all__ = ["instance_home"]

_DEFAULT = {"telemetry": {"enabled": False}}


def _moved(config: dict[str, Any], base: Path) -> dict[str, Any]:
    """``config`` with its local storage paths (sqlite, artifacts, compute logs) under ``base``."""
    moved = dict(config)
    storage = moved.get("storage")
    if not storage or "sqlite" in storage:
        moved["storage"] = {"sqlite": {"base_dir": str(base / "storage")}}
    artifacts = moved.get("local_artifact_storage")
    if not artifacts or artifacts.get("class") == "LocalArtifactStorage":
        moved["local_artifact_storage"] = {
            "module": "dagster._core.storage.root",
            "class": "LocalArtifactStorage",
            "config": {"base_dir": str(base)},
        }
    logs = moved.get("compute_logs")
    if not logs or logs.get("class") == "LocalComputeLogManager":
        moved["compute_logs"] = {
            "module": "dagster._core.storage.local_compute_log_manager",
            "class": "LocalComputeLogManager",
            "config": {"base_dir": str(base / "logs")},
        }
    return moved


def _write_if_changed(path: Path, text: str) -> None:
    if not (path.is_file() and path.read_text(encoding="utf-8") == text):
        atomic_write_text(path, text)


def instance_home(root: Path) -> Path:
    """The ``DAGSTER_HOME`` for the project at ``root`` and the current ``PTF_HOME``; made if needed."""
    home = ptf_home()
    project_yaml = root / "dagster.yaml"
    if is_local_url(home) and Path(home) == root / ".ptf":
        if project_yaml.is_file():
            return root
        base = root / ".ptf" / "dagster"
    elif is_local_url(home):
        base = Path(home) / "dagster"
    else:
        base = root / ".ptf" / "instances" / hashlib.sha256(home.encode()).hexdigest()[:12]
    config: dict[str, Any] = dict(_DEFAULT)
    if project_yaml.is_file():
        config = yaml.safe_load(project_yaml.read_text(encoding="utf-8")) or {}
    text = (
        f"# Written by ptf for PTF_HOME={home}: the project's dagster.yaml with its storage moved here.\n"
        + yaml.safe_dump(_moved(config, base), sort_keys=False)
    )
    _write_if_changed(base / "dagster.yaml", text)
    return base
