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

``PTF_INSTANCE=postgres`` puts the storage (runs, event log, schedules and sensor ticks and
cursors, the ``batch`` partitions) in the PostgreSQL database ``PTF_PG_URL`` names
(``postgresql://USER@HOST:PORT/DB``; the password only in ``PTF_PG_PASSWORD``, which the written
``dagster.yaml`` names but never holds), so daemons and webservers on other machines share it;
artifacts and compute logs stay in the home's local instance folder. ``sqlite`` (the default) is
the embedded instance above.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml

from ptfactory.errors import UserInputError
from ptfactory.home import is_local_url, ptf_home
from ptfactory.storage.fs import atomic_write_text

__all__ = [
    "INSTANCE_ENV",
    "PG_PASSWORD_ENV",
    "PG_URL_ENV",
    "instance_home",
    "instance_kind",
    "postgres_storage",
]

INSTANCE_ENV = "PTF_INSTANCE"
PG_URL_ENV = "PTF_PG_URL"
PG_PASSWORD_ENV = "PTF_PG_PASSWORD"
_KINDS = ("sqlite", "postgres")
_DEFAULT = {"telemetry": {"enabled": False}}
_URL_FORM = "postgresql://USER@HOST:PORT/DB"


def instance_kind() -> str:
    """``$PTF_INSTANCE``: ``sqlite`` (the default, embedded) or ``postgres``."""
    kind = os.environ.get(INSTANCE_ENV, "").strip().lower() or "sqlite"
    if kind not in _KINDS:
        raise UserInputError(
            f"{INSTANCE_ENV}={kind!r} is not an instance kind; use sqlite (the default) or postgres"
        )
    return kind


def postgres_storage() -> dict[str, Any]:
    """The ``storage: postgres`` block for ``$PTF_PG_URL``; the password stays an env reference."""
    url = os.environ.get(PG_URL_ENV, "").strip()
    if not url:
        raise UserInputError(
            f"{INSTANCE_ENV}=postgres needs {PG_URL_ENV}={_URL_FORM} (the password, if any, in "
            f"{PG_PASSWORD_ENV}); or unset {INSTANCE_ENV} for the embedded SQLite instance"
        )
    parts = urlsplit(url)
    if parts.password is not None:
        # the URL ends up in dagster.yaml and in messages: a password in it would leak there
        raise UserInputError(
            f"{PG_URL_ENV} holds a password; drop it from the URL and set {PG_PASSWORD_ENV} instead"
        )
    try:
        port = parts.port or 5432
    except ValueError:
        port = 0
    if parts.scheme not in ("postgresql", "postgres") or not parts.hostname or not parts.username:
        port = 0
    if not port or len(parts.path) < 2:
        raise UserInputError(f"{PG_URL_ENV}={url!r} is not a PostgreSQL URL; write it as {_URL_FORM}")
    db: dict[str, Any] = {
        "username": unquote(parts.username or ""),
        "hostname": parts.hostname,
        "port": port,
        "db_name": unquote(parts.path[1:]),
        # dagster-postgres ships psycopg2; SQLAlchemy 2.1's plain postgresql:// means psycopg 3
        "scheme": "postgresql+psycopg2",
    }
    if parts.query:
        db["params"] = dict(parse_qsl(parts.query))
    if os.environ.get(PG_PASSWORD_ENV):
        db["password"] = {"env": PG_PASSWORD_ENV}
    return {"postgres": {"postgres_db": db}}


def _check_answers(storage: dict[str, Any]) -> None:
    """Fail here, naming the server and the fix, rather than in the middle of a Dagster traceback."""
    db = storage["postgres"]["postgres_db"]
    shown = f"postgresql://{db['username']}@{db['hostname']}:{db['port']}/{db['db_name']}"
    try:
        import dagster_postgres  # noqa: F401  (the storage class dagster.yaml names)
        import psycopg2  # type: ignore[import-untyped]
    except ImportError as exc:
        raise UserInputError(
            f"{INSTANCE_ENV}=postgres needs dagster-postgres ({exc}); "
            "install it with `pip install 'ptfactory[postgres]'`"
        ) from exc
    try:
        psycopg2.connect(
            host=db["hostname"],
            port=db["port"],
            user=db["username"],
            dbname=db["db_name"],
            password=os.environ.get(PG_PASSWORD_ENV, ""),
            connect_timeout=5,
            **db.get("params", {}),
        ).close()
    except psycopg2.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserInputError(
            f"{INSTANCE_ENV}=postgres: PostgreSQL at {shown} does not answer ({reason}); start the "
            f"server or fix {PG_URL_ENV} / {PG_PASSWORD_ENV}, or unset {INSTANCE_ENV} for the "
            "embedded SQLite instance"
        ) from exc


def _moved(config: dict[str, Any], base: Path, storage: dict[str, Any] | None = None) -> dict[str, Any]:
    """``config`` with its local storage paths (sqlite, artifacts, compute logs) under ``base``, and
    its storage ``storage`` when one is given."""
    moved = dict(config)
    current = moved.get("storage")
    if storage is not None:
        moved["storage"] = storage
    elif not current or "sqlite" in current:
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
    kind = instance_kind()
    storage = postgres_storage() if kind == "postgres" else None
    project_yaml = root / "dagster.yaml"
    if is_local_url(home) and Path(home) == root / ".ptf":
        if project_yaml.is_file() and storage is None:
            return root
        base = root / ".ptf" / "dagster"
    elif is_local_url(home):
        base = Path(home) / "dagster"
    else:
        base = root / ".ptf" / "instances" / hashlib.sha256(home.encode()).hexdigest()[:12]
    config: dict[str, Any] = dict(_DEFAULT)
    if project_yaml.is_file():
        config = yaml.safe_load(project_yaml.read_text(encoding="utf-8")) or {}
    if storage is not None:
        _check_answers(storage)
    where = "in PostgreSQL (PTF_INSTANCE=postgres)" if storage else "moved here"
    text = (
        f"# Written by ptf for PTF_HOME={home}: the project's dagster.yaml with its storage {where}.\n"
        + yaml.safe_dump(_moved(config, base, storage), sort_keys=False)
    )
    _write_if_changed(base / "dagster.yaml", text)
    return base
