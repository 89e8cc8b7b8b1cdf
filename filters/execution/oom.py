"""Whether the kernel OOM-killed a process in a sandbox container, as the Docker engine says.

Asked of the engine, not read from a cgroup file: the file's path differs between cgroup v1 and v2
and between cgroup drivers (and only a remote engine's own host has it). The engine reports both
ways on every version: its ``oom`` events for the container, and ``State.OOMKilled``, which newer
engines set on any OOM kill in the container (older ones, such as 20.10, only when its first
process dies of one: the events are what they report for a job's process).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

__all__ = ["OomWatch"]

_WAIT_S = 2.0  # for the engine to hear of a kill: it learns of one asynchronously


class OomWatch:
    """The OOM kills the engine reported for one container, so far."""

    def __init__(self, container_id: str) -> None:
        self.container_id = container_id
        self.since = time.time() - 1.0  # the container's events, from (about) its start
        self.events = 0  # "oom" events seen so far
        self.flag = False  # State.OOMKilled seen so far

    def killed(self, client: Any, wait_s: float = _WAIT_S) -> bool:
        """Whether a process of the container was OOM-killed since the last call; waits up to
        ``wait_s`` for the engine to hear of it (call it for a job that died of SIGKILL only)."""
        deadline = time.monotonic() + wait_s
        while True:
            count, flagged = self._events(client), self._flag(client)
            if count > self.events or (flagged and not self.flag):
                self.events, self.flag = max(count, self.events), flagged
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def _events(self, client: Any) -> int:
        try:
            stream = client.events(
                since=f"{self.since:.6f}",
                until=f"{time.time():.6f}",  # in the past: the stream ends instead of waiting for more
                filters={"container": self.container_id, "event": "oom"},
                decode=True,
            )
        except Exception:  # an engine that cannot list events: State.OOMKilled still answers
            return self.events
        try:
            return sum(1 for _ in stream)
        except Exception:
            return self.events
        finally:
            with contextlib.suppress(Exception):
                stream.close()

    def _flag(self, client: Any) -> bool:
        try:
            return bool(client.api.inspect_container(self.container_id)["State"].get("OOMKilled"))
        except Exception:  # the container is gone (removed by the watchdog): nothing new to say
            return self.flag
