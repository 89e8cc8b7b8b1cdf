"""Test seams: named points where a test stops a publisher or a pull, to race or kill it there.

Two kinds, both no-ops unless a test arms them:

* :func:`seam` — across processes, through the environment (``PTF_TEST_PUBLISH_SEAM``): a child
  ``ptf`` or a spawned publisher waits at a point, fails there, or meets others at a barrier.
* :func:`pause` / :func:`hold` — in one process, with ``threading.Event`` s: the first thread that
  reaches the held point stops there until the test releases it, so a test interleaves two
  publishers deterministically (one paused between what it read and the publish lock).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ptfactory.errors import PublishError

__all__ = ["BEFORE_PUBLISH", "SEAM_ENV", "Hold", "hold", "pause", "seam"]

SEAM_ENV = "PTF_TEST_PUBLISH_SEAM"
# where DatasetStore stops a publish before it takes the lock (local) or reads the latest (object store)
BEFORE_PUBLISH = "before-publish"


def seam(point: str) -> None:
    """If ``PTF_TEST_PUBLISH_SEAM`` names ``point``, stop here (tests only).

    The variable is JSON: ``{"point": "staged" | "staging:<split>" | "copied:<k>" | "pull:…", "dir":
    DIR}`` plus ``"parties": n`` (a barrier: wait until n processes arrived), ``"raise": true`` (fail
    here), or neither (wait until ``DIR/release`` exists; a test may kill the process meanwhile).
    Arriving writes ``DIR/arrived-<pid>``.
    """
    raw = os.environ.get(SEAM_ENV)
    if not raw:
        return
    spec = json.loads(raw)
    if spec.get("point") != point:
        return
    folder = Path(spec["dir"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"arrived-{os.getpid()}").touch()
    if spec.get("raise"):
        raise PublishError(f"test seam {SEAM_ENV}: failed on purpose at {point}")
    parties = int(spec.get("parties", 0))
    deadline = time.monotonic() + float(spec.get("timeout", 120))
    while time.monotonic() < deadline:
        if (len(list(folder.glob("arrived-*"))) >= parties) if parties else (folder / "release").exists():
            return
        time.sleep(0.01)
    raise PublishError(f"test seam {SEAM_ENV}: nothing released {point} in time")


class Hold:
    """A held point: the first thread to arrive (for ``name``, if given) waits for :meth:`release`."""

    def __init__(self, point: str, name: str | None, timeout_s: float) -> None:
        self.point, self.name, self.timeout_s = point, name, timeout_s
        self.arrived = threading.Event()  # set when a thread is stopped here
        self.released = threading.Event()
        self._taken = threading.Lock()
        self._used = False

    def __call__(self, name: str) -> None:
        if self.name is not None and name != self.name:
            return
        with self._taken:  # only the first arrival stops: the others (and its own retries) pass
            if self._used:
                return
            self._used = True
        self.arrived.set()
        if not self.released.wait(self.timeout_s):
            raise PublishError(f"test hold {self.point}: not released in {self.timeout_s:g} s")

    def wait_arrived(self, timeout_s: float = 120.0) -> None:
        if not self.arrived.wait(timeout_s):
            raise AssertionError(f"nothing reached {self.point} in {timeout_s:g} s")

    def release(self) -> None:
        self.released.set()


_held: dict[str, Hold] = {}


def pause(point: str, name: str) -> None:
    """Stop here if a test holds ``point`` (``name``: the dataset, to hold one of several)."""
    held = _held.get(point)
    if held is not None:
        held(name)


@contextmanager
def hold(point: str, name: str | None = None, timeout_s: float = 120.0) -> Iterator[Hold]:
    """Hold ``point`` while the block runs (tests only); leaving it releases whoever waits."""
    if point in _held:
        raise RuntimeError(f"{point} is already held")
    held = _held[point] = Hold(point, name, timeout_s)
    try:
        yield held
    finally:
        held.release()
        _held.pop(point, None)
