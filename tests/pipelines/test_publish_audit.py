"""Write–audit–publish through Dagster: near duplicates the split held out are moved to train
before staging; a version that still leaks, or that holds a batch whose judged_samples checks
failed, is refused by a blocking check while staged, and nothing is published; a clean one
publishes with its audit in the manifest."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from ptfactory.assets.audit import publish_audit
from ptfactory.assets.datasets import preference_dataset, sft_dataset
from ptfactory.assets.resources import SettingsResource, factory_resources
from ptfactory.assets.resources.engines import chat_tokenizer
from ptfactory.pipelines.annotate import _failed
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.audit import checks_metadata
from ptfactory.storage.retract import retract
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.split import held_out, split_table
from ptfactory.storage.versions import AuditFailed, DatasetStore
from tests.filters.test_leaks import QUESTIONS, _table


def _materialize(home: Path, config: Path) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        # curated_samples as written by the test, read through the factory's IO manager
        [dg.SourceAsset("curated_samples", io_manager_key="samples_io"), sft_dataset],
        instance=dg.DagsterInstance.ephemeral(),
        resources=factory_resources(str(config), str(home)),
        raise_on_error=False,
    )


# a strict dedup threshold and half the rows in validation: near copies land on both sides
_LEAK_SETTINGS = "dedup: {threshold: 0.7}\ndatasets: {validation_fraction: 0.5}\n"


def _factory_yaml(tmp_path: Path, model: Path, extra: str = "") -> Path:
    """A factory.yaml with ``model`` as the generator, plus ``extra`` YAML."""
    config = tmp_path / "factory.yaml"
    config.write_text(f"engines:\n  generator: {{model: {model}}}\n{extra}")
    return config


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_leaks_and_failed_batches_are_refused_while_staged(
    home: Path, tmp_path: Path, tiny_model: Path
) -> None:
    config = _factory_yaml(tmp_path, tiny_model, _LEAK_SETTINGS)
    clean = _table(list(QUESTIONS.values()), "b1")
    # near copies from another batch: the split keys them by their own ids, so some land across
    copies = _table([f"{q}| Thanks." for q in QUESTIONS.values()], "b2")
    leaky = pa.concat_tables([clean, copies])
    sides = split_table(leaky, 0.5)
    assert {"train", "validation"} <= set(sides)  # the premise: the copies straddle the split
    assets = AssetStore(str(home))
    assets.write("curated_samples", leaky)

    # the split is mended before staging: held-out near copies of train rows move to train
    mended = _materialize(home, config)
    assert mended.success, _failed(mended)
    store = DatasetStore(str(home))
    manifest = store.resolve("sft@v1")
    assert manifest.stats["moved_to_train"] > 0 and manifest.checks["no_split_leak"]["passed"]
    # the staged check itself refuses a leaking version: the split as the split alone makes it
    settings = SettingsResource(home=str(home), config_path=str(config))
    with pytest.raises(AuditFailed, match="no_split_leak") as refused:
        store.publish(
            "sft",
            sides,
            kind="sft",
            config_hash="leaky",
            audit=publish_audit(settings, lambda: chat_tokenizer(settings.config)),
        )
    assert refused.value.failed[0].rows  # names the held-out rows at fault
    assert store.versions("sft") == [1]
    home = tmp_path / "second-home"  # the next parts start afresh
    assets, store = AssetStore(str(home)), DatasetStore(str(home))

    # without the copies, but b1's judged_samples recorded a failed schema check: still refused
    assets.write("curated_samples", clean)
    judged = clean.replace_schema_metadata(
        checks_metadata({"judged_samples_schema_valid": False, "judged_samples_judges_counted": True})
    )
    assets.write("judged_samples", judged, "b1")
    refused = _materialize(home, config)
    assert not refused.success
    batches = _checks(refused)["sft_dataset_judged_samples_passed"]
    assert not batches.passed and "b1: judged_samples_schema_valid" in batches.metadata["failed"].value
    assert store.versions("sft") == []

    # a judge left out (judges_counted failed) does not stop publishing
    assets.write(
        "judged_samples",
        clean.replace_schema_metadata(
            checks_metadata({"judged_samples_schema_valid": True, "judged_samples_judges_counted": False})
        ),
        "b1",
    )
    published = _materialize(home, config)
    assert published.success
    assert all(e.passed for e in _checks(published).values())
    manifest = store.resolve("sft@latest")
    assert manifest.version == 1
    assert {"shards_verified", "no_split_leak", "chat_template_renders", "judged_samples_passed"} <= set(
        manifest.checks
    )
    assert all(c["passed"] for c in manifest.checks.values())


def test_curation_never_brings_retracted_rows_back(home: Path, tmp_path: Path, tiny_model: Path) -> None:
    config = _factory_yaml(tmp_path, tiny_model)
    questions = list(QUESTIONS.values())
    b1, b2 = _table(questions[:4], "b1"), _table(questions[4:7], "b2")
    assets = AssetStore(str(home))
    assets.write("curated_samples", pa.concat_tables([b1, b2]))
    assert _materialize(home, config).success
    store = DatasetStore(str(home))
    retract(store, "sft@v1", ["b2"], [], reason="bad annotator", by="carol")
    assert store.resolve("sft@latest").rows == 4

    # a new batch arrives; curated_samples still holds b2 (curation reads every batch so far)
    b3 = _table(questions[7:], "b3")
    assets.write("curated_samples", pa.concat_tables([b1, b2, b3]))
    result = _materialize(home, config)
    assert result.success
    latest = store.resolve("sft@latest")
    assert (latest.version, latest.batches, latest.rows) == (3, ["b1", "b3"], 4 + b3.num_rows)
    meta = result.asset_materializations_for_node("sft_dataset")[0].metadata
    assert "| retracted | 3 |" in meta["left_out"].value


def _rebatched(table: pa.Table, index: int, batch: str) -> pa.Table:
    """The same rows with one row's ``batch`` changed: a row whose curated content a label changed."""
    values = table.column("batch").to_pylist()
    values[index] = batch
    position = table.schema.get_field_index("batch")
    return table.set_column(position, table.schema.field(position), pa.array(values, pa.string()))


def test_a_new_label_publishes_and_audits_only_the_change(
    home: Path, tmp_path: Path, tiny_model: Path
) -> None:
    config = _factory_yaml(tmp_path, tiny_model, _LEAK_SETTINGS + "storage: {shard_rows: 2}\n")
    rows = _table(list(QUESTIONS.values()), "b1")
    assets, store = AssetStore(str(home)), DatasetStore(str(home))
    assets.write("curated_samples", rows)
    assert _materialize(home, config).success
    v1 = store.resolve("sft@v1")
    assert set(v1.splits) == {"train", "validation"} and len(v1.shards) > 4

    # a label changed one row: only its bucket is rewritten, and each check looked at that row
    changed = _rebatched(rows, 3, "b2")
    assets.write("curated_samples", changed)
    result = _materialize(home, config)
    assert result.success, _failed(result)
    meta = result.asset_materializations_for_node("sft_dataset")[0].metadata
    assert meta["publish"].value.startswith("delta: 1 row(s) in, 0 out")
    v2 = store.resolve("sft@latest")
    assert v2.version == 2 and [s.reused_from for s in v2.shards].count(None) == 1
    assert all(c["passed"] for c in v2.checks.values())
    assert {
        n: v2.checks[n]["detail"].get("checked_rows") for n in ("no_split_leak", "chat_template_renders")
    } == {
        "no_split_leak": 1,
        "chat_template_renders": 1,
    }
    sides = {s: set(store.read("sft@v1", split=s).column("sample_id").to_pylist()) for s in v1.splits}
    assert {s: set(store.read("sft@v2", split=s).column("sample_id").to_pylist()) for s in v2.splits} == sides
    assert (
        v2.stats["rows_per_batch"] == {"b1": 9, "b2": 1}
        and v2.stats["split_rows"] == v2.stats["rows_per_split"]
    )

    # a new row that near-copies a held-out row and lands in train: the held-out row moves to train
    held = store.read("sft@v2", split="validation")
    text = held.column("messages")[0].as_py()[0]["content"]
    copy = next(
        t
        for t in (
            _table([f"{text}| {word}"], "b3") for word in ("Thanks", "Please", "Cheers", "Bye", "Ok", "Yes")
        )
        if not held_out(t, 0.5)[0].as_py()  # its own side: train
    )
    assets.write("curated_samples", pa.concat_tables([changed, copy]))
    result = _materialize(home, config)
    assert result.success, _failed(result)
    v3 = store.resolve("sft@latest")
    assert v3.stats["moved_to_train"] == 1 and v3.checks["no_split_leak"]["passed"]
    assert (
        held.column("sample_id")[0].as_py()
        in store.read("sft@v3", split="train").column("sample_id").to_pylist()
    )

    # the staged check itself refuses a change that leaks: the copy put on the train side as it is
    settings = SettingsResource(home=str(home), config_path=str(config))
    held = store.read("sft@v3", split="validation")
    text = held.column("messages")[0].as_py()[0]["content"]
    with pytest.raises(AuditFailed, match="no_split_leak") as refused:
        store.publish_delta(
            "sft",
            {"train": _table([f"{text}| Thanks"], "b4")},
            base=3,
            kind="sft",
            config_hash=v3.config_hash,
            shard_rows=2,
            audit=publish_audit(settings, lambda: chat_tokenizer(settings.config)),
        )
    assert refused.value.failed[0].rows == (held.column("sample_id")[0].as_py(),)
    assert store.versions("sft") == [1, 2, 3]


def test_a_preference_dataset_publishes_a_changed_pair_as_a_change(
    home: Path, tmp_path: Path, tiny_model: Path
) -> None:
    config = _factory_yaml(tmp_path, tiny_model, _LEAK_SETTINGS + "storage: {shard_rows: 2}\n")
    records = []
    for text in QUESTIONS.values():
        messages = [{"role": "user", "content": text}]
        chosen = [{"role": "assistant", "content": f"A careful answer to: {text}"}]
        rejected = [{"role": "assistant", "content": f"No idea about: {text}"}]
        records.append(
            {
                "sample_id": sample_id("preference", messages, chosen=chosen, rejected=rejected),
                "batch": "b1",
                "kind": "preference",
                "messages": messages,
                "chosen": chosen,
                "rejected": rejected,
            }
        )
    pairs = from_records(records)
    assets, store = AssetStore(str(home)), DatasetStore(str(home))
    assets.write("curated_samples", pairs)

    def run() -> dg.ExecuteInProcessResult:
        return dg.materialize(
            [dg.SourceAsset("curated_samples", io_manager_key="samples_io"), preference_dataset],
            instance=dg.DagsterInstance.ephemeral(),
            resources=factory_resources(str(config), str(home)),
        )

    assert run().success
    assets.write("curated_samples", _rebatched(pairs, 4, "b2"))  # an expert relabelled one pair
    result = run()
    meta = result.asset_materializations_for_node("preference_dataset")[0].metadata
    assert meta["publish"].value.startswith("delta: 1 row(s) in, 0 out")
    v2 = store.resolve("preference@latest")
    assert v2.version == 2 and all(c["passed"] for c in v2.checks.values())
    assert v2.checks["no_split_leak"]["detail"]["checked_rows"] == 1
    assert sorted(store.read("preference@v2").column("batch").to_pylist()) == ["b1"] * 9 + ["b2"]
