"""Judge vs execution on HumanEval: canonical solutions and `return None` mutants, validated in the
real sandbox, then judged by the real panel; the agreement lands in the asset's metadata."""

from pathlib import Path

import dagster as dg
import pytest

from ptfactory.assets.resources import FactoryResource, SampleIOManager
from ptfactory.assets.scoring import judged_samples
from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.validate import validate_samples
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import from_records, sample_id
from tests.filters.test_execution import humaneval

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_judge_vs_execution_agreement_is_reported(home: Path, tmp_path: Path, smollm2: Path) -> None:
    records = []
    for problem in humaneval()[:4]:
        for answer in (problem["canonical_solution"], "    return None\n"):
            messages = [
                {"role": "user", "content": problem["prompt"]},
                {"role": "assistant", "content": answer},
            ]
            records.append(
                {
                    "sample_id": sample_id(
                        "code", messages, tests=problem["test"], entry_point=problem["entry_point"]
                    ),
                    "batch": "he",
                    "kind": "code",
                    "messages": messages,
                    "tests": problem["test"],
                    "entry_point": problem["entry_point"],
                    "decisions": [],
                }
            )
    with DockerSandbox(Limits(timeout_s=10)) as sandbox:
        validated, _ = validate_samples(from_records(records), sandbox)
    # keep the sandbox's verdicts as scores but not its drops: the judges must see the mutants too
    rows = validated.to_pylist()
    for row in rows:
        row["decisions"] = []
    AssetStore(str(home)).write("difficulty_scored", from_records(rows), "he")
    config = tmp_path / "factory.yaml"
    config.write_text(f"engines:\n  generator: {{model: {smollm2}}}\n")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["he"])
    from ptfactory.assets.partitions import batch_partitions

    upstream = dg.AssetSpec(
        "difficulty_scored",
        partitions_def=batch_partitions,
        metadata={"dagster/io_manager_key": "samples_io"},
    )
    result = dg.materialize(
        [upstream, judged_samples],
        instance=instance,
        partition_key="he",
        resources={
            "factory": FactoryResource(home=str(home), config_path=str(config)),
            "samples_io": SampleIOManager(home=str(home)),
        },
    )
    assert result.success
    meta = result.asset_materializations_for_node("judged_samples")[0].metadata
    print(
        {
            k: getattr(v, "value", v)
            for k, v in meta.items()
            if k.startswith(("judge_vs", "krippendorff", "parse"))
        }
    )
    compared = meta["judge_vs_execution_compared"].value
    parsed_llm_votes = 8 - round(
        meta["parse_failure_rate"].value * 24
    )  # 3 judges x 8 rows; only the LLM fails
    assert compared == parsed_llm_votes  # every parsed LLM vote on a code row is compared with the sandbox
    if compared:
        assert 0.0 <= meta["judge_vs_execution_agreement"].value <= 1.0
    judged = AssetStore(str(home)).read("judged_samples", "he").to_pylist()
    execution_votes = [next(v for v in r["scores"]["judges"] if v["judge"] == "execution") for r in judged]
    assert [v["score"] for v in execution_votes] == [10.0, 1.0] * 4  # the sandbox's word, as a vote
