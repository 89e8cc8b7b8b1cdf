"""A real PostgreSQL server for the test session: Debian's ``postgresql`` binaries, its data in a
temporary folder, listening on 127.0.0.1 only, with password authentication over TCP.

PostgreSQL refuses to run as root and CI runs as root, so there ``initdb`` and ``pg_ctl`` run as the
``postgres`` user (``runuser``), on a folder that user owns. Missing binaries fail the tests: a
machine without PostgreSQL is not set up (``scripts/setup-system.sh`` installs it)."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Postgres", "free_port", "pg_bin", "postgres_server"]

DB = "dagster"
USER = "ptf"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pg_bin() -> Path:
    """The folder of ``initdb``/``pg_ctl``: on PATH, else Debian's ``/usr/lib/postgresql/<v>/bin``."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    candidates = sorted(
        (Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin") if (Path(p) / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not candidates:
        pytest.fail(
            "PostgreSQL is not installed (no pg_ctl on PATH nor /usr/lib/postgresql/*/bin/initdb); "
            "run scripts/setup-system.sh (it installs Debian's postgresql package)",
            pytrace=False,
        )
    return candidates[-1]


@dataclass
class Postgres:
    port: int
    password: str
    data: Path
    host: str = "127.0.0.1"
    user: str = USER
    db: str = DB

    @property
    def url(self) -> str:
        """The URL ptf takes (``PTF_PG_URL``): no password in it."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.db}"

    def env(self) -> dict[str, str]:
        return {"PTF_INSTANCE": "postgres", "PTF_PG_URL": self.url, "PTF_PG_PASSWORD": self.password}

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg2

        with (
            psycopg2.connect(
                host=self.host, port=self.port, user=self.user, password=self.password, dbname=self.db
            ) as conn,
            conn.cursor() as cur,
        ):
            cur.execute(sql, params)
            rows: list[tuple[Any, ...]] = cur.fetchall()
        conn.close()
        return rows


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _run(cmd: list[str]) -> None:
    done = subprocess.run(_as_owner(cmd), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Postgres]:
    """initdb into a fresh folder, start on a free port of 127.0.0.1, create the ``dagster``
    database; stopped and removed after the session."""
    import psycopg2

    binaries = pg_bin()
    # not under pytest's tmp folders: those are 0700 root, which the postgres user cannot enter
    root = Path(tempfile.mkdtemp(prefix="ptf-pg-"))
    data = root / "data"
    password = secrets.token_urlsafe(16)
    (root / "pwfile").write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(root / "pwfile", "postgres", "postgres")
    server = Postgres(port=free_port(), password=password, data=data)
    _run(
        [
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            f"--pwfile={root / 'pwfile'}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-instructions",
        ]
    )
    # test data only: durability settings off, enough connections for a daemon, two webservers,
    # a code server and a run's step processes
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={server.port} -c unix_socket_directories={root} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
    )
    pg_ctl = str(binaries / "pg_ctl")
    _run([pg_ctl, "-D", str(data), "-l", str(root / "server.log"), "-o", options, "-w", "-t", "60", "start"])
    try:
        conn = psycopg2.connect(
            host=server.host, port=server.port, user=USER, password=password, dbname="postgres"
        )
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DB}")
        conn.close()
        yield server
    finally:
        _run([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)
