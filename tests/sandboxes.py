"""What the sandbox tests share: after a pool closes, none of its containers may be left."""

from __future__ import annotations

import subprocess

__all__ = ["assert_no_containers_left"]


def assert_no_containers_left(session: str) -> None:
    """No container (running or stopped) carries this sandbox session's label."""
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=ptf.sandbox={session}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert left == [], "containers left behind after close()"
