"""The real Docker sandbox the harness tests of this folder share (one pool per module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    with DockerSandbox(Limits(timeout_s=5, memory_mb=256, pids=32), workers=2) as box:
        yield box
