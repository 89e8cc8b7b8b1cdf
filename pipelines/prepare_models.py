"""Weights made ready before a run: every bundled model a factory.yaml's engines use converted
from its GGUF, and its CTranslate2 folder made where that backend runs it.

    python -m ptfactory.pipelines.prepare_models [factory.yaml]

``make demo-setup`` runs it on demo/factory.yaml, so the demo's run spends its time on the
factory's work, not on a one-off conversion (the run would convert on first use anyway: both
conversions are atomic and skipped when done). Hub ids, servers and local folders are left as
they are.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ptfactory.engines.bundled import BUNDLED, resolve_model_path
from ptfactory.engines.spec import EngineSpec, resolved_backend

__all__ = ["config_engines", "prepare"]


def config_engines(config_path: Path) -> list[EngineSpec]:
    """The engines a factory.yaml runs: generator, student and every LLM judge's (a judge
    without one uses the generator's), each once."""
    from ptfactory.config import load_config

    config = load_config(config_path, required=True)
    specs = [config.engines.generator, config.engines.student]
    specs += [j.engine or config.engines.generator for j in config.judges if j.type == "llm"]
    unique: dict[str, EngineSpec] = {}
    for spec in specs:
        unique.setdefault(spec.model_dump_json(), spec)
    return list(unique.values())


def prepare(spec: EngineSpec) -> list[Path]:
    """The folders ``spec``'s weights load from, converted now if they were not (bundled models)."""
    if spec.model not in BUNDLED:
        return []
    made = [Path(resolve_model_path(spec.model))]
    if resolved_backend(spec) == "ctranslate2":
        from ptfactory.engines.ct2_models import ct2_model_dir

        made.append(ct2_model_dir(spec.model))
    return made


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0] in ("-h", "--help")):
        print(__doc__)
        return 0 if args and args[0] in ("-h", "--help") else 2
    from ptfactory.errors import ConfigError

    config = Path(args[0] if args else "factory.yaml")
    try:
        specs = config_engines(config)
    except ConfigError as exc:
        print(f"error: {exc}; give the factory.yaml whose models to prepare", file=sys.stderr)
        return 2
    for spec in specs:
        started = time.perf_counter()
        for folder in prepare(spec):
            print(
                f"{spec.model} ({resolved_backend(spec)}): {folder} ({time.perf_counter() - started:.1f} s)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
