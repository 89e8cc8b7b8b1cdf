"""Label Studio's lifecycle: its own venv, its data, its credentials, its one process.

Label Studio pins ``pyarrow<25`` and Django 5.2, so it lives in a venv of its own under
``<state>/venvs/labelstudio`` (made on first use). Its data lives under ``<state>/labelstudio``;
what we started is recorded in ``<state>/annotation/server.json`` (pid, its kernel start time,
port), so ``down`` stops exactly that process group and nothing else.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ptfactory.errors import AnnotationError
from ptfactory.storage.fs import atomic_write_text

__all__ = [
    "LABEL_STUDIO_VERSION",
    "Credentials",
    "LabelStudioServer",
    "ServerState",
]

LABEL_STUDIO_VERSION = "1.23.2"
DEFAULT_PORT = 8080
DEFAULT_ADMIN = "admin@ptfactory.localhost"


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str
    token: str

    def to_json(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password, "token": self.token}


@dataclass(frozen=True)
class ServerState:
    pid: int
    start_ticks: int  # /proc/<pid>/stat field 22: tells our process from a later one with its pid
    host: str
    port: int
    started_at: float

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces; fields after it are plain
    return int(stat.rsplit(")", 1)[1].split()[19])


def _port_answers(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


class LabelStudioServer:
    """``up`` / ``down`` / ``status`` for the Label Studio the factory runs on this machine."""

    def __init__(
        self,
        state_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        env_prefix: str = "PTF_LS_",
        python: str | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.host = host
        self.port = port
        self.env_prefix = env_prefix
        self.python = python or sys.executable
        # PTF_LS_VENV: share one install between projects (and test runs); it is large
        self.venv = Path(os.environ.get("PTF_LS_VENV") or state_dir / "venvs" / "labelstudio")
        self.data_dir = state_dir / "labelstudio"
        self.run_dir = state_dir / "annotation"
        self.state_file = self.run_dir / "server.json"
        self.credentials_file = self.run_dir / "credentials.json"
        self.log_file = self.run_dir / "labelstudio.log"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # credentials ---------------------------------------------------------------------------
    def credentials(self) -> Credentials:
        """From ``PTF_LS_USERNAME`` / ``PTF_LS_PASSWORD`` / ``PTF_LS_TOKEN``, else generated once
        into a 0600 file (never into the repo)."""
        stored: dict[str, Any] = {}
        if self.credentials_file.exists():
            stored = json.loads(self.credentials_file.read_text())
        env = os.environ
        admin = stored.get("admin", {})
        username = env.get(f"{self.env_prefix}USERNAME") or admin.get("username") or DEFAULT_ADMIN
        password = env.get(f"{self.env_prefix}PASSWORD") or admin.get("password") or secrets.token_urlsafe(18)
        token = env.get(f"{self.env_prefix}TOKEN") or admin.get("token") or secrets.token_hex(20)
        creds = Credentials(username, password, token)
        if admin != creds.to_json() and not any(
            env.get(f"{self.env_prefix}{k}") for k in ("USERNAME", "PASSWORD", "TOKEN")
        ):
            self.store_credentials({**stored, "admin": creds.to_json()})
        return creds

    def annotators(self) -> dict[str, dict[str, str]]:
        if not self.credentials_file.exists():
            return {}
        return dict(json.loads(self.credentials_file.read_text()).get("annotators", {}))

    def store_credentials(self, data: dict[str, Any]) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.credentials_file, json.dumps(data, indent=2), mode=0o600)

    # venv ----------------------------------------------------------------------------------
    @property
    def executable(self) -> Path:
        return self.venv / "bin" / "label-studio"

    def ensure_installed(self, say: Callable[[str], None] = print) -> None:
        """Create the venv and install Label Studio once (a few minutes, first use only)."""
        stamp = self.venv / f".ptf-label-studio-{LABEL_STUDIO_VERSION}"
        if stamp.exists() and self.executable.exists():
            return
        say(f"installing Label Studio {LABEL_STUDIO_VERSION} into {self.venv} (once; a few minutes)")
        if not (self.venv / "bin" / "python").exists():
            subprocess.run([self.python, "-m", "venv", str(self.venv)], check=True)
        pip = subprocess.run(
            [
                str(self.venv / "bin" / "pip"),
                "install",
                "--disable-pip-version-check",
                "-q",
                f"label-studio=={LABEL_STUDIO_VERSION}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if pip.returncode != 0:
            lines = [line for line in pip.stderr.splitlines() if "is ignored: it is neither" not in line]
            raise AnnotationError(
                f"installing label-studio=={LABEL_STUDIO_VERSION} into {self.venv} failed: "
                + "\n".join(lines[-15:])
            )
        stamp.touch()

    def environment(self, creds: Credentials | None = None) -> dict[str, str]:
        creds = creds or self.credentials()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "DJANGO"))}
        env.update(
            LABEL_STUDIO_BASE_DATA_DIR=str(self.data_dir),
            DJANGO_DB="sqlite",
            LABEL_STUDIO_USERNAME=creds.username,
            LABEL_STUDIO_PASSWORD=creds.password,
            LABEL_STUDIO_USER_TOKEN=creds.token,
            LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN="true",
            LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK="true",
            SENTRY_DSN="",
            FRONTEND_SENTRY_DSN="",
            LATEST_VERSION_CHECK="false",
            COLLECT_ANALYTICS="false",
            LABEL_STUDIO_HOST=self.url,
            SECRET_KEY=self._secret_key(),  # stable, so browser sessions survive a restart
        )
        return env

    def _secret_key(self) -> str:
        if env_key := os.environ.get(f"{self.env_prefix}SECRET_KEY"):
            return env_key
        stored = json.loads(self.credentials_file.read_text()) if self.credentials_file.exists() else {}
        if not stored.get("secret_key"):
            stored["secret_key"] = secrets.token_urlsafe(40)
            self.store_credentials(stored)
        return str(stored["secret_key"])

    # lifecycle -----------------------------------------------------------------------------
    def state(self) -> ServerState | None:
        """What we started, if it is still that process; a stale record is removed."""
        if not self.state_file.exists():
            return None
        data = json.loads(self.state_file.read_text())
        state = ServerState(**data)
        if _start_ticks(state.pid) != state.start_ticks:
            self.state_file.unlink(missing_ok=True)
            return None
        return state

    def answers(self, creds: Credentials | None = None, timeout: float = 5.0) -> bool:
        """True when the API takes our token."""
        return self._whoami(creds or self.credentials(), timeout) == 200

    def _whoami(self, creds: Credentials, timeout: float) -> int | None:
        """The API's status code for our token (None: nothing answers yet)."""
        try:
            response = httpx.get(
                f"{self.url}/api/current-user/whoami",
                headers={"Authorization": f"Token {creds.token}"},
                timeout=timeout,
            )
        except httpx.HTTPError:
            return None
        return response.status_code

    def up(
        self, *, wait_s: float = 900.0, refused_s: float = 60.0, say: Callable[[str], None] = print
    ) -> ServerState:
        """Start Label Studio (or find the one we started) and wait until its API answers;
        ``refused_s``: how long it may answer but refuse our token before that is an error."""
        creds = self.credentials()
        state = self.state()
        if state is not None:
            if not self.answers(creds):
                self._wait(state, creds, wait_s, say, refused_s=refused_s)
            return state
        if _port_answers(self.host, self.port):
            raise AnnotationError(
                f"port {self.port} on {self.host} is taken by a process ptf did not start; "
                f"stop it or choose another port (ptf annotate up --port N)"
            )
        self.ensure_installed(say)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        command = [
            str(self.executable),
            "start",
            "--no-browser",
            "--internal-host",
            self.host,
            "--port",
            str(self.port),
            # the admin's e-mail, password and token reach it through the environment
            # (LABEL_STUDIO_USERNAME, _PASSWORD, _USER_TOKEN): a command line is readable by every
            # user of the machine (`ps`), an environment only by the process's owner
        ]
        with self.log_file.open("ab") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(creds),
                start_new_session=True,  # its own process group: `down` stops all of it
                cwd=self.data_dir,
            )
        ticks = _start_ticks(process.pid)
        state = ServerState(process.pid, ticks or 0, self.host, self.port, time.time())
        atomic_write_text(self.state_file, json.dumps(state.__dict__))
        self._wait(state, creds, wait_s, say, process, refused_s=refused_s)
        return state

    def _wait(
        self,
        state: ServerState,
        creds: Credentials,
        wait_s: float,
        say: Callable[[str], None],
        process: subprocess.Popen[bytes] | None = None,
        *,
        refused_s: float = 60.0,
    ) -> None:
        say(f"waiting for Label Studio at {state.url} (the first start migrates its database: minutes)")
        deadline = time.monotonic() + wait_s
        refused_since: float | None = None
        while time.monotonic() < deadline:
            status = self._whoami(creds, timeout=2.0)
            if status == 200:
                return
            # a server that answers but keeps refusing our token was made with other credentials
            # (its database kept, credentials.json lost or replaced): it never will take it
            if status in (401, 403):
                refused_since = refused_since if refused_since is not None else time.monotonic()
                if time.monotonic() - refused_since > refused_s:
                    raise AnnotationError(
                        f"Label Studio at {state.url} is up but refuses the admin token of "
                        f"{self.credentials_file}: its database in {self.data_dir} was made with other "
                        f"credentials. Restore that file (or set {self.env_prefix}TOKEN), or run "
                        f"`ptf annotate down` and move {self.data_dir} aside to start an empty one "
                        "(its projects and labels stay in the moved folder)"
                    )
            else:
                refused_since = None
            if (process is not None and process.poll() is not None) or _start_ticks(
                state.pid
            ) != state.start_ticks:
                self.state_file.unlink(missing_ok=True)
                raise AnnotationError(
                    f"Label Studio exited while starting; the end of {self.log_file}:\n{self.log_tail()}"
                )
            time.sleep(1.0)
        raise AnnotationError(
            f"Label Studio did not answer at {state.url} within {wait_s:.0f} s; see {self.log_file}"
        )

    def down(self, timeout: float = 30.0) -> bool:
        """Stop the process group we started; False when none of ours runs."""
        state = self.state()
        if state is None:
            return False
        try:
            os.killpg(state.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _start_ticks(state.pid) == state.start_ticks:
            time.sleep(0.2)
        if _start_ticks(state.pid) == state.start_ticks:
            try:
                os.killpg(state.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # reap it when it is our child (tests start and stop it in one process)
        try:
            os.waitpid(state.pid, os.WNOHANG)
        except ChildProcessError:
            pass
        self.state_file.unlink(missing_ok=True)
        return True

    def status(self) -> dict[str, Any]:
        state = self.state()
        creds = self.credentials()
        answering = self.answers(creds, timeout=5.0) if state else False  # a loaded box answers slowly
        version = None
        if answering:
            try:
                version = httpx.get(f"{self.url}/api/version", timeout=5.0).json().get("release")
            except (httpx.HTTPError, ValueError):
                version = None
        return {
            "running": state is not None,
            "answering": answering,
            "url": state.url if state else self.url,
            "pid": state.pid if state else None,
            "version": version,
            "username": creds.username,
            "credentials_file": str(self.credentials_file),
            "data_dir": str(self.data_dir),
            "log": str(self.log_file),
        }

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
