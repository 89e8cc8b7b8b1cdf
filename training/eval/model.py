"""What ``ptf eval MODEL`` evaluates: a checkpoint folder, ``bundled``, or an engine of factory.yaml.

- a folder ``ptf train`` wrote (``ptf_lineage.json`` beside the weights): a checkpoint; its report
  is stored beside it (``<folder>/evals/``) and linked to the version it was trained on;
- any other model folder (config.json and weights);
- ``bundled`` (SmolLM2-135M-Instruct) or ``bundled:gemma3-270m``;
- an engine role of factory.yaml (``generator``, ``student``): that engine as configured.

Generation goes through the factory's engines (:func:`~ptfactory.engines.spec.build_engine`), so
an evaluation answers the way the factory generates. The model hash is the sha256 of the weights,
config and tokenizer files (a local folder), else of the engine's identity (a server's model).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptfactory.engines.bundled import BUNDLED, resolve_model_path
from ptfactory.engines.spec import EngineSpec
from ptfactory.errors import UserInputError

__all__ = ["LINEAGE_FILE", "EvalModel", "model_hash", "resolve_model"]

LINEAGE_FILE = "ptf_lineage.json"  # what training/run.py writes beside a checkpoint
_HASHED = (".json", ".safetensors", ".bin", ".gguf", ".model", ".txt", ".jinja")


@dataclass(frozen=True)
class EvalModel:
    given: str  # as the user named it
    spec: EngineSpec
    checkpoint: Path | None = None  # a folder written by `ptf train`
    lineage: Mapping[str, Any] | None = None  # its ptf_lineage.json

    @property
    def folder(self) -> Path | None:
        """The local folder the weights load from (None: a server's model)."""
        if self.spec.backend == "openai":
            return None
        path = (
            Path(resolve_model_path(self.spec.model)) if self.spec.model in BUNDLED else Path(self.spec.model)
        )
        return path if path.is_dir() else None


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_model(model: str, engines: Mapping[str, EngineSpec] | None = None) -> EvalModel:
    """``model`` as an :class:`EvalModel`; a :class:`UserInputError` naming the choices otherwise."""
    engines = engines or {}
    if model in BUNDLED:
        return EvalModel(model, EngineSpec(model=model, device=_device()))
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserInputError(
                f"MODEL {path} is a folder without config.json: give a checkpoint `ptf train` wrote, "
                "a Hugging Face model folder, 'bundled', or an engine of factory.yaml"
            )
        lineage_file = path / LINEAGE_FILE
        lineage = json.loads(lineage_file.read_text(encoding="utf-8")) if lineage_file.is_file() else None
        spec = EngineSpec(model=str(path.resolve()), device=_device())
        return EvalModel(model, spec, path.resolve() if lineage else None, lineage)
    if model in engines:
        return EvalModel(model, engines[model])
    choices = ", ".join(["bundled", *sorted(engines)])
    raise UserInputError(
        f"MODEL {model!r} is not a folder, a bundled model or an engine of factory.yaml; give a checkpoint "
        f"folder (`ptf train ... --output DIR`) or one of: {choices}"
    )


def model_hash(model: EvalModel, identity: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the folder's weight, config and tokenizer files (names and bytes), or
    ``identity:<hex>`` of the engine's identity where there is no local folder."""
    folder = model.folder
    if folder is None:
        text = json.dumps(dict(identity), sort_keys=True)
        return "identity:" + hashlib.sha256(text.encode()).hexdigest()
    digest = hashlib.sha256()
    for file in sorted(folder.iterdir()):
        if file.is_file() and file.suffix in _HASHED and file.name != LINEAGE_FILE:
            digest.update(file.name.encode() + b"\0")
            with file.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
    return "sha256:" + digest.hexdigest()
