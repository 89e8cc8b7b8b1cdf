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
