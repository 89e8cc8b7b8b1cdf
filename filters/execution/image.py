"""The sandbox image ``ptf-sandbox``: a minimal Debian with Python, built without a registry.

Where a registry answers, the base is ``python:3.11-slim``; where none does (this machine),
the root file system is built with ``debootstrap --variant=minbase`` and ``docker import``-ed.
Either way a tiny init (PID 1 that only reaps children, so a job cannot kill it and zombies do
not pile up) is added. The image is labelled with a hash of this recipe: building again with
the same recipe reuses it.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ptfactory.errors import SandboxError

__all__ = ["IMAGE", "RECIPE_VERSION", "build_image", "find_image", "recipe_hash"]

IMAGE = "ptf-sandbox"
RECIPE_VERSION = 1
SUITE = "bookworm"
PACKAGES = ("python3",)
REGISTRY_BASE = "python:3.11-slim"

# PID 1 of every sandbox container: reaps orphans; the kernel shields PID 1 from signals it does
# not handle, so `kill -9 -1` from a job cannot take the container down.
INIT = """import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.2)
"""


def recipe_hash() -> str:
    recipe = {"v": RECIPE_VERSION, "suite": SUITE, "packages": PACKAGES, "init": INIT, "base": REGISTRY_BASE}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def find_image(client: Any) -> str | None:
    """The tag of an image built from the current recipe, if there is one."""
    wanted = recipe_hash()
    for image in client.images.list(name=IMAGE):
        if (image.labels or {}).get("ptf.recipe") == wanted:
            return f"{IMAGE}:{wanted}"
    return None


def _mirror() -> str:
    """The Debian mirror this machine's apt uses (debootstrap needs one; no internet otherwise)."""
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for match in re.finditer(r"(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s*)?)(https?://\S+)", text):
            url = match.group(1)
            if "debian" in url and "security" not in url:
                return url
    return "http://deb.debian.org/debian"


def _init_layer(base: str, recipe: str) -> bytes:
    dockerfile = (
        f"FROM {base}\n"
        "RUN mkdir -p /opt/ptf /work && chmod 1777 /work\n"
        "COPY init.py /opt/ptf/init.py\n"
        f'LABEL ptf.recipe="{recipe}"\n'
        'CMD ["python3", "/opt/ptf/init.py"]\n'
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in (("Dockerfile", dockerfile), ("init.py", INIT)):
            data = content.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _debootstrap_base(say: Callable[[str], None]) -> str:
    if not shutil.which("debootstrap"):
        raise SandboxError("no registry answers and debootstrap is missing: apt-get install -y debootstrap")
    with tempfile.TemporaryDirectory(prefix="ptf-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        mirror = _mirror()
        say(f"debootstrap {SUITE} from {mirror} (a few minutes, once)")
        run = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(rootfs),
                mirror,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            raise SandboxError(
                f"debootstrap failed ({run.returncode}): {run.stderr[-1000:] or run.stdout[-1000:]}"
            )
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / cache, ignore_errors=True)
        base = f"{IMAGE}-base:{recipe_hash()}"
        say("docker import")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "-", base], stdin=tar.stdout, capture_output=True, text=True, check=False
        )
        tar.wait()
        if imported.returncode != 0:
            raise SandboxError(f"docker import failed: {imported.stderr.strip()}")
    return base


def build_image(client: Any, say: Callable[[str], None] = print, force: bool = False) -> str:
    """Build (or find) the sandbox image; returns its tag."""
    recipe = recipe_hash()
    if not force and (found := find_image(client)):
        say(f"{found} is up to date (recipe {recipe})")
        return found
    import docker.errors

    try:
        client.images.pull(REGISTRY_BASE)
        base = REGISTRY_BASE
        say(f"base {REGISTRY_BASE} from the registry")
    except docker.errors.APIError:
        say("no registry answers: building the base with debootstrap")
        base = _debootstrap_base(say)
    tag = f"{IMAGE}:{recipe}"
    try:
        client.images.build(
            fileobj=io.BytesIO(_init_layer(base, recipe)),
            custom_context=True,
            tag=tag,
            rm=True,
            network_mode="none",
        )
    except docker.errors.BuildError as exc:
        raise SandboxError(f"building {tag} failed: {exc}") from exc
    client.images.get(tag).tag(IMAGE, "latest")
    say(f"built {tag}")
    return tag
