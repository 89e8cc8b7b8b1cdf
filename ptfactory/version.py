"""Package version and the code version recorded in provenance and manifests."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

__version__ = "0.1.0"

_REPO = Path(__file__).resolve().parent.parent


@functools.cache
def code_version() -> str:
    """``0.1.0+g<sha>`` (``.dirty`` when the tree has edits) inside a git checkout, else the version.

    Recorded in every row's provenance and in every manifest so a sample can be traced
    to the exact code that produced it.
    """
    try:
        sha = subprocess.run(
            ["git", "-C", str(_REPO), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{sha}{'.dirty' if dirty else ''}"
