from pathlib import Path

import pytest

from ptfactory.config import FactoryConfig, load_config, parse_config
from ptfactory.errors import ConfigError


def test_defaults_need_no_file(tmp_path: Path) -> None:
    config = load_config(tmp_path / "factory.yaml")
    assert config == FactoryConfig()
    assert config.storage.shard_rows == 50_000
    assert len(config.config_hash()) == 16


def test_repo_factory_yaml_is_valid() -> None:
    repo = Path(__file__).resolve().parents[2]
    assert load_config(repo / "factory.yaml", required=True).datasets.sft == "sft"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"storage": {"shard_row": 5}},
            "unknown key 'storage.shard_row'; allowed under 'storage': shard_rows",
        ),
        ({"storag": {}}, "unknown key 'storag'; allowed at the top level: seeds, storage, datasets"),
        ({"storage": {"shard_rows": 0}}, "'storage.shard_rows' is 0: Input should be greater than 0"),
        ({"storage": {"shard_rows": "many"}}, "'storage.shard_rows' is \"many\""),
        ([1, 2], "expected a mapping of sections"),
    ],
)
def test_errors_are_one_line_naming_key_and_allowed(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "factory.yaml"
    path.write_text("storage:\n  shard_rows: 5\n bad: [\n")
    with pytest.raises(ConfigError, match=r"not valid YAML at line"):
        load_config(path)


def test_config_hash_changes_with_values() -> None:
    assert FactoryConfig().config_hash() != parse_config({"storage": {"shard_rows": 7}}).config_hash()


def test_two_named_judges_are_exactly_the_panel_with_their_families(tmp_path: Path) -> None:
    path = tmp_path / "factory.yaml"
    path.write_text(
        "judges:\n"
        "  - {name: gemma, type: llm, engine: {model: /models/gemma-3-270m-it}}\n"
        "  - {name: relevance, type: relevance}\n"
    )
    judges = load_config(path, required=True).judges
    assert [(j.name, j.type, j.family) for j in judges] == [
        ("gemma", "llm", "gemma3"),  # derived from the model's name
        ("relevance", "relevance", "embedding"),
    ]
    assert judges[0].engine is not None and judges[0].engine.model == "/models/gemma-3-270m-it"


def test_judge_families_default_from_the_model_or_are_given() -> None:
    defaults = FactoryConfig().judges
    assert [(j.name, j.family) for j in defaults] == [
        ("smollm2", "smollm2"),
        ("gemma3", "gemma3"),  # a second LLM family by default
        ("minilm-relevance", "embedding"),
    ]
    # executing code is no longer a panel member by default: the code verifier runs the tests in the
    # sandbox first and its fail is final (an `execution` judge may still be configured)
    assert "code" in FactoryConfig().judging.verifiers
    config = parse_config(
        {
            "engines": {"generator": {"model": "Qwen/Qwen2.5-0.5B-Instruct"}},
            "judges": [{"name": "a"}, {"name": "b", "type": "llm", "family": "house"}],
        }
    )
    # a judge without an engine runs on the generator's model, so it has that family
    assert defaults[1].engine is not None and defaults[1].engine.model_id == "gemma-3-270m"
    assert (defaults[1].prompt, defaults[1].scoring) == ("completion", "pmi")
    assert (defaults[0].prompt, defaults[0].scoring) == ("chat", "pmi")
    assert [j.family for j in config.judges] == ["qwen2.5", "house"]


def test_unknown_judge_type_is_one_line_naming_the_allowed_types() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"judges": [{"name": "vibes", "type": "vibe-check"}]})
    message = str(info.value)
    assert "'judges.0.type' is \"vibe-check\"; allowed: 'llm', 'relevance' or 'execution'" in message
    assert "\n" not in message


def test_judge_names_are_unique() -> None:
    with pytest.raises(ConfigError, match="judge name 'a' appears twice") as info:
        parse_config({"judges": [{"name": "a"}, {"name": "a", "type": "relevance"}]})
    assert "\n" not in str(info.value)
