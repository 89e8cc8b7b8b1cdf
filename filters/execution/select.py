"""Which sandbox runs untrusted code here: the Docker sandbox, or bubblewrap where a user opted into it
(``sandbox.backend: bwrap``); never none. Running untrusted code unsandboxed is not an option, and
neither is a silent fall to the weaker sandbox: ``auto`` means Docker, or an error saying how to
start it or how to opt into bubblewrap."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ptfactory.errors import SandboxError
from ptfactory.filters.execution.base import Sandbox
from ptfactory.filters.execution.limits import Limits, SandboxConfig

__all__ = ["BackendStatus", "backend_status", "open_sandbox"]

WARNING = (
    "WARNING: untrusted code runs in the bubblewrap sandbox (sandbox.backend: bwrap): namespaces + "
    "rlimits, no cgroups, weaker than the Docker sandbox. Set sandbox.backend: auto and start dockerd "
    "for full isolation."
)
_OPT_IN = "or opt into the weaker bubblewrap sandbox with `sandbox: {backend: bwrap}` in factory.yaml"


@dataclass
class BackendStatus:
    backend: str | None  # the sandbox that runs code with this setting: docker | bwrap | None (none can)
    detail: str


def backend_status(backend: str = "auto") -> BackendStatus:
    """What ``sandbox.backend: <backend>`` runs code in here, and why (``ptf doctor``)."""
    from ptfactory.filters.execution.bwrap_sandbox import bwrap_available
    from ptfactory.filters.execution.docker_sandbox import docker_client
    from ptfactory.filters.execution.image import find_image

    setting = f"sandbox.backend: {backend}"
    if backend == "bwrap":
        reason = bwrap_available()
        if reason is not None:
            return BackendStatus(None, f"{setting}, but bwrap cannot run: {reason}")
        return BackendStatus("bwrap", f"{setting} (opted in): namespaces + rlimits, weaker than Docker")
    try:
        client = docker_client()
    except SandboxError as exc:
        return BackendStatus(None, f"{setting} needs Docker: {exc}, {_OPT_IN}")
    image = find_image(client)
    if image is None:
        return BackendStatus(
            None, f"{setting}: Docker answers but the sandbox image is missing: run `ptf sandbox build`"
        )
    return BackendStatus("docker", f"{setting}: Docker engine with {image}")


def open_sandbox(
    limits: Limits | None = None,
    workers: int | None = None,
    backend: str = "auto",
    *,
    jobs_per_container: int | None = None,
) -> Sandbox:
    """The sandbox ``backend`` names (auto | docker: Docker; bwrap: bubblewrap, opted into).

    ``jobs_per_container`` (Docker: recycle a container after this many jobs) defaults to the
    ``limits``' own when they are a :class:`SandboxConfig` (the factory.yaml section)."""
    if backend == "bwrap":
        from ptfactory.filters.execution.bwrap_sandbox import BwrapSandbox

        sandbox = BwrapSandbox(limits, workers)
        print(WARNING, file=sys.stderr)
        return sandbox
    if backend not in ("auto", "docker"):
        raise SandboxError(f"sandbox.backend {backend!r} is not one of: auto, docker, bwrap")
    from ptfactory.filters.execution.docker_sandbox import DockerSandbox, docker_client

    try:
        client = docker_client()
    except SandboxError as exc:
        raise SandboxError(f"sandbox.backend: {backend} needs Docker: {exc}, {_OPT_IN}") from exc
    if jobs_per_container is None and isinstance(limits, SandboxConfig):
        jobs_per_container = limits.jobs_per_container
    return DockerSandbox(limits, workers, client=client, jobs_per_container=jobs_per_container or 100)
