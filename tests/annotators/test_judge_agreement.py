"""Judge vs execution on HumanEval: canonical solutions and `return None` mutants, validated in the
real sandbox, then judged by the real panel as the sandbox left them (the mutants' failures are
judged too); every LLM vote counts and the agreement lands in the asset's metadata."""

from pathlib import Path

import dagster as dg
import pytest

from ptfactory.assets.judging import judged_samples
from ptfactory.assets.resources import factory_resources
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
    # the sandbox's trail as it is: the panel must judge the failing mutants as well
    AssetStore(str(home)).write("difficulty_scored", validated, "he")
    config = tmp_path / "factory.yaml"
    config.write_text(
        f"engines:\n  generator: {{model: {smollm2}}}\n"
        "judges:\n  - {name: smollm2, type: llm}\n  - {name: execution, type: execution}\n"
    )
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
        resources=factory_resources(str(config), str(home)),
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
    assert meta["counted_share_smollm2"].value == 1.0  # probability scoring: no vote is lost
    header, _, *lines = meta["judges"].value.splitlines()
    columns = [c.strip() for c in header.strip("|").split("|")]
    smollm2 = next(line for line in lines if line.startswith("| smollm2 |"))
    shares = dict(zip(columns, (c.strip() for c in smollm2.strip("|").split("|")), strict=True))
    # every vote is named by how it was read: constrained JSON, score-token probability or likelihood
    assert sum(float(shares[m].rstrip("%")) for m in ("json", "probability", "likelihood")) == 100.0
    assert shares["lost"] == "0.0%"
    assert meta["judge_vs_execution_compared"].value == 8  # every code row, passing or failing
    assert 0.0 <= meta["judge_vs_execution_agreement"].value <= 1.0
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks["judged_samples_judges_counted"] is True
    judged = AssetStore(str(home)).read("judged_samples", "he").to_pylist()
    execution = [next(v for v in r["scores"]["judges"] if v["judge"] == "execution") for r in judged]
    assert [v["score"] == 10.0 for v in execution] == [True, False] * 4  # graded by the sandbox
    assert all(v["score"] is not None and v["score"] < 5 for v in execution[1::2])
