"""Which sandbox runs untrusted code here: Docker when an engine answers, else bubblewrap with a
loud warning; never none. Running untrusted code unsandboxed is not an option."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ptfactory.errors import SandboxError
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.limits import Limits

__all__ = ["BackendStatus", "backend_status", "open_sandbox"]

WARNING = (
    "WARNING: no Docker engine answers; untrusted code runs in the bubblewrap fallback "
    "(namespaces + rlimits, weaker than the Docker sandbox). Start dockerd for full isolation."
)


@dataclass
class BackendStatus:
    backend: str | None  # docker | bwrap | None
    detail: str


def backend_status() -> BackendStatus:
    from ptfactory.filters.execution.bwrap_sandbox import bwrap_available
    from ptfactory.filters.execution.docker_sandbox import docker_client
    from ptfactory.filters.execution.image import find_image

    try:
        client = docker_client()
    except SandboxError as exc:
        reason = bwrap_available()
        if reason is None:
            return BackendStatus("bwrap", f"fallback: {exc}")
        return BackendStatus(None, f"no sandbox: {exc}; bwrap: {reason}")
    image = find_image(client)
    if image is None:
        return BackendStatus(None, "Docker answers but the sandbox image is missing: run `ptf sandbox build`")
    return BackendStatus("docker", f"Docker engine with {image}")


def open_sandbox(limits: Limits | None = None, workers: int | None = None, backend: str = "auto") -> Sandbox:
    """The best sandbox available (``backend``: auto | docker | bwrap)."""
    if backend in ("auto", "docker"):
        from ptfactory.filters.execution.docker_sandbox import DockerSandbox, docker_client

        try:
            client = docker_client()
        except SandboxError:
            if backend == "docker":
                raise
        else:  # an engine answers: use it (a missing image is an error to fix, not a reason to fall back)
            return DockerSandbox(limits, workers, client=client)
    from ptfactory.filters.execution.bwrap_sandbox import BwrapSandbox

    sandbox = BwrapSandbox(limits, workers)
    print(WARNING, file=sys.stderr)
    return sandbox
