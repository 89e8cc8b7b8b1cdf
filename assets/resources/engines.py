"""``EnginesResource``: the run's LLM engines, built lazily (one per distinct spec) and closed after."""

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.config import FactoryConfig
from ptfactory.engines.base import Engine
from ptfactory.engines.openai_engine import OpenAIEngine, privacy_redactor
from ptfactory.engines.spec import EngineSpec, build_engine

__all__ = ["EnginesResource", "chat_tokenizer"]


def chat_tokenizer(config: FactoryConfig) -> Any:
    """The generator's tokenizer (the bundled model's for a remote engine): the chat template the
    published rows are checked against. A tokenizer, not an engine: nothing is loaded to generate."""
    from transformers import AutoTokenizer

    from ptfactory.engines.bundled import resolve_model_path

    spec = config.engines.generator
    model = spec.model if spec.backend != "openai" else "bundled"
    path = resolve_model_path(model)
    return AutoTokenizer.from_pretrained(path, local_files_only=Path(path).is_dir())


class EnginesResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The engines of ``engines.<role>`` (and the judges' specs), under the run's config."""

    settings: SettingsResource

    _engines: dict[str, Engine] = PrivateAttr(default_factory=dict)

    def engine(self, role: str, spec: EngineSpec | None = None) -> Engine:
        """The engine configured under ``engines.<role>`` (or ``spec``), built once per run; one
        engine per distinct spec, so a judge on the generator's model shares its loaded weights."""
        spec = spec or getattr(self.settings.config.engines, role)
        key = spec.model_dump_json()
        if key not in self._engines:
            engine = build_engine(spec, self.settings.state_dir / "cache" / "responses.sqlite")
            if isinstance(engine, OpenAIEngine):  # what leaves the machine, under the run's privacy
                privacy = self.settings.config.privacy
                engine.redact = privacy_redactor(privacy) if privacy.enabled else None
            self._engines[key] = engine
        return self._engines[key]

    def price_per_mtok(self, role: str) -> float:
        return float(getattr(self.settings.config.engines, role).price_per_mtok)

    def chat_tokenizer(self) -> Any:
        return chat_tokenizer(self.settings.config)

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()
