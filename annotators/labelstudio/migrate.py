"""Apply Label Studio's database migrations without starting the server.

The first ``label-studio start`` on an empty data folder migrates its SQLite database, which takes
minutes on a small machine; a set-up step can do it ahead (``ptf annotate migrate``, which
``make demo``'s set-up runs), so that ``ptf annotate up`` is a warm start. Every ``label-studio``
command migrates before it does anything else; ``user`` (asking about the admin) is the one that
does nothing more. A stamp per Label Studio version in the data folder makes a second call free.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

from ptfactory.errors import AnnotationError

if TYPE_CHECKING:
    from ptfactory.annotators.labelstudio.server import LabelStudioServer

__all__ = ["migrate"]


def migrate(server: LabelStudioServer, say: Callable[[str], None] = print, timeout_s: float = 1800) -> bool:
    """Migrate ``server``'s database now; False when it already was (by this call or a start)."""
    from ptfactory.annotators.labelstudio.server import LABEL_STUDIO_VERSION

    stamp = server.data_dir / f".ptf-migrated-{LABEL_STUDIO_VERSION}"
    if stamp.exists():
        return False
    server.ensure_installed(say)
    server.data_dir.mkdir(parents=True, exist_ok=True)
    say(f"migrating Label Studio's database in {server.data_dir} (once; minutes)")
    creds = server.credentials()
    done = subprocess.run(
        [str(server.executable), "user", f"--username={creds.username}"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=server.environment(creds),
        cwd=server.data_dir,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0 or not (server.data_dir / "label_studio.sqlite3").exists():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise AnnotationError(f"migrating Label Studio's database in {server.data_dir} failed:\n{tail}")
    stamp.touch()
    return True
