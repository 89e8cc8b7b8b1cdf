"""The execution stage's infrastructure gate through Dagster (factory.yaml ``execution``): a sandbox
whose every job dies, the control program's too (the real Docker sandbox, broken under the job),
fails the blocking ``infra_errors`` check past ``execution.max_infra_error_share``, and nothing
downstream of the batch runs; under a share the batch stays within, the rows go on as abstentions."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from ptfactory.assets.execution import execution_validated
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import factory_resources
from ptfactory.assets.resources.sandbox import SandboxResource
from ptfactory.assets.scoring import difficulty_scored
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import from_records
from tests.filters.faults import DyingSandbox
from tests.filters.test_graded_execution import _code_records

pytestmark = pytest.mark.integration


class _Dying(DyingSandbox):
    def close(self) -> None:  # the real pool under it: its containers go
        self.inner.close()


@pytest.mark.parametrize("share", [0.1, 1.0])
def test_the_gate(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, share: float) -> None:
    local = SandboxResource.local
    monkeypatch.setattr(SandboxResource, "pool", lambda self: _Dying(local(self, 1)))
    AssetStore(str(home)).write(
        "decontaminated_samples", from_records(_code_records(("    return x + 1\n",))), "b"
    )
    config = tmp_path / "factory.yaml"
    config.write_text(f"execution: {{max_infra_error_share: {share}, infra_retries: 0}}\n")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b"])
    upstream = dg.AssetSpec("decontaminated_samples", partitions_def=batch_partitions).with_io_manager_key(
        "samples_io"
    )
    assets = [upstream, execution_validated] + ([difficulty_scored] if share < 1 else [])
    result = dg.materialize(
        assets,
        instance=instance,
        partition_key="b",
        resources=factory_resources(str(config), str(home)),
        raise_on_error=False,
    )
    check = next(
        e for e in result.get_asset_check_evaluations() if e.check_name == "execution_validated_infra_errors"
    )
    meta = result.asset_materializations_for_node("execution_validated")[0].metadata
    assert meta["infra_errors"].value == 1 and check.metadata["infra_error_share"].value == 1.0
    rows = AssetStore(str(home)).read("execution_validated", "b").to_pylist()
    assert rows[0]["scores"]["execution"]["status"] == "sandbox_error"  # an abstention, not a failure
    if share < 1:
        assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
        assert "nothing from this batch is published" in (check.description or "")
        assert rows[0]["decisions"][-1]["reason"] == "sandbox_unreliable"
        assert not result.success and not result.asset_materializations_for_node("difficulty_scored")
    else:
        assert check.passed and result.success
        assert rows[0]["decisions"][-1]["reason"] == "execution_sandbox_error"
