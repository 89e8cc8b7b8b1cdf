"""``ptf ui``: the Dagster UI on loopback, in its own process group so one Ctrl-C stops all of it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
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
        "ptfactory.pipelines.definitions",
        "-h",
        host,
        "-p",
        str(port),
    ]
    # A new session: `dagster dev` started from a non-interactive shell ignores SIGINT, and its
    # webserver and daemon are children; signalling the whole group is what stops them all.
    process = subprocess.Popen(command, start_new_session=True)

    stop_asked: list[float] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        stop_asked.append(time.monotonic())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        # `dagster dev` can hang on its way out (its code server waits on a heartbeat): once asked
        # to stop, the group gets _STOP_GRACE_S, then SIGKILL, so one `kill` always stops the UI.
        while process.poll() is None:
            if stop_asked and time.monotonic() - stop_asked[0] > _STOP_GRACE_S:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            time.sleep(0.2)
        return process.returncode
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # stragglers of the group
        process.wait()
