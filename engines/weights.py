"""What a local model folder holds, as a short fingerprint.

A model retrained into the same folder keeps its path, so a path alone would serve the old
weights' conversions and cached answers; the fingerprint (the files' names, sizes and mtimes,
no hashing of gigabytes) changes with the weights.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path

__all__ = ["folder_fingerprint", "local_folder", "model_fingerprint"]

# config, tokenizer and weight files: what decides an answer
_SUFFIXES = (".json", ".safetensors", ".bin", ".gguf", ".model")


def folder_fingerprint(source: Path) -> str:
    """Twelve hex digits over the folder's resolved path and its model files' name, size, mtime."""
    parts = [str(source.resolve())]
    for file in sorted(source.iterdir()):
        if file.is_file() and file.suffix in _SUFFIXES:
            stat = file.stat()
            parts.append(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def local_folder(model_path: str) -> Path | None:
    """``model_path`` as a folder on this machine; None for a bundled model's name or a hub id."""
    from ptfactory.engines.bundled import BUNDLED

    if model_path in BUNDLED:
        return None
    folder = Path(model_path)
    return folder if folder.is_dir() else None


def model_fingerprint(model_path: str) -> str:
    """What fixes a model spec's weights: a bundled model's package and version, a local folder's
    :func:`folder_fingerprint`, or "" for a hub id (its name is all that is known here)."""
    from ptfactory.engines.bundled import BUNDLED

    entry = BUNDLED.get(model_path)
    if entry is not None:
        dist = entry.install.split("==")[0]
        try:
            return f"{dist}=={importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            return entry.install
    folder = local_folder(model_path)
    return folder_fingerprint(folder) if folder is not None else ""
