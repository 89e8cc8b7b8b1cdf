"""Resuming a killed run: the last complete checkpoint, and the same command checked against it.

The Trainer writes ``checkpoint-N/`` (weights, optimizer, scheduler, RNG) and writes its
``trainer_state.json`` last, so a folder whose trainer state parses is complete; one a ``kill -9``
cut short is removed before the run resumes (its step is trained again). ``ptf_run.json`` in the
output folder holds the run's resolved config: a rerun into the same folder must ask for the same
run (``max_steps`` may grow), else it would resume someone else's optimizer state.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from ptfactory.errors import UserInputError
from ptfactory.storage.fs import atomic_write_text

__all__ = ["RUN_FILE", "check_same_run", "last_checkpoint"]

RUN_FILE = "ptf_run.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_MAY_DIFFER = {"max_steps", "output", "save_checkpoints"}


def _complete(folder: Path) -> bool:
    state = folder / "trainer_state.json"
    try:
        json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True


def last_checkpoint(folder: Path) -> Path | None:
    """The newest complete ``checkpoint-N`` under ``folder``; incomplete ones are removed."""
    if not folder.is_dir():
        return None
    found = sorted(
        ((int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))),
        reverse=True,
    )
    for _, path in found:
        if _complete(path):
            return path
        shutil.rmtree(path, ignore_errors=True)  # cut short by a kill: it holds no usable state
    return None


def check_same_run(output: Path, config: dict[str, Any], resuming: bool) -> None:
    """Record ``config`` in ``output/ptf_run.json``, or refuse a different run into a folder that
    holds one's checkpoints."""
    path = output / RUN_FILE
    if resuming and path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        changed = sorted(
            k for k in set(before) | set(config) if k not in _MAY_DIFFER and before.get(k) != config.get(k)
        )
        if changed:
            key = changed[0]
            raise UserInputError(
                f"{output} holds checkpoints of another run ({key}: {before.get(key)!r} there, {config.get(key)!r} "
                "now); rerun the same command to resume it, or pass a fresh --output"
            )
    atomic_write_text(path, json.dumps(config, indent=2, sort_keys=True, default=str) + "\n")
