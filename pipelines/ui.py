"""``ptf ui``: the Dagster UI on loopback, in its own process group so one Ctrl-C stops all of it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from types import FrameType

__all__ = ["serve_ui"]

_STOP_GRACE_S = 20


def serve_ui(host: str, port: int) -> int:
    """Run ``dagster dev`` until it exits or we get SIGINT/SIGTERM; returns its exit code."""
    command = [
        sys.executable,
        "-m",
        "dagster",
        "dev",
        "-m",
        "pipelines.definitions",
        "-h",
        host,
        "-p",
        str(port),
    ]
    # A new session: `dagster dev` started from a non-interactive shell ignores SIGINT, and its
    # webserver and daemon are children; signalling the whole group is what stops them all.
    process = subprocess.Popen(command, start_new_session=True)

    def stop(signum: int, _frame: FrameType | None) -> None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        return process.wait()
    finally:
        try:
            process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # stragglers of the group
