"""What a local model folder holds, as a short fingerprint.

A model retrained into the same folder keeps its path, so a path alone would serve the old
weights' conversions and cached answers; the fingerprint (the files' names, sizes and mtimes,
no hashing of gigabytes) changes with the weights.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["folder_fingerprint", "local_folder"]

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
