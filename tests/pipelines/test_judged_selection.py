"""Which rows the panel scores (assets/judging.py): never the rows dropped for a reason no judge can
change (truncated, contaminated, duplicates); on a paid or remote judge engine not the difficulty
stage's drops either (its diagnostic table is kept on embedded engines only); always the rows a
verifier decides (code that ran, a reference to check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from ptfactory.assets.judging import judged_samples, rows_to_judge
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.resources import PanelResource, factory_resources
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.schema import from_records, sample_id

ROWS = {
    # name: (drop stage, drop reason, extra fields)
    "live": (None, None, {}),
    "truncated": ("difficulty", "truncated", {}),
    "near_duplicate": ("dedup", "near_duplicate", {}),
    "contaminated": ("decontaminate", "contaminated", {}),
    "too_easy": ("difficulty", "too_easy", {}),
    "too_easy_with_reference": ("difficulty", "too_easy", {"reference": {"answer": "4", "source": "seed"}}),
}


def _table() -> Any:
    records = []
    for name, (stage, reason, extra) in ROWS.items():
        messages = [
            {"role": "user", "content": f"{name}: what is 2 + 2?"},
            {"role": "assistant", "content": "4"},
        ]
        trail = [{"stage": "seed", "verdict": "keep", "reason": "test", "detail": None}]
        if stage:
            trail.append({"stage": stage, "verdict": "drop", "reason": reason, "detail": None})
        records.append(
            {"sample_id": sample_id("sft", messages), "batch": "b", "kind": "sft", "messages": messages}
            | {"decisions": trail, "provenance": {"method": "test"}, **extra}
        )
    code = [{"role": "user", "content": "def inc(x):"}, {"role": "assistant", "content": "    return x"}]
    records.append(
        {
            "sample_id": sample_id("code", code),
            "batch": "b",
            "kind": "code",
            "messages": code,
            "tests": "def check(candidate):\n    assert candidate(1) == 2\n",
            "entry_point": "inc",
            "scores": {"execution": {"status": "failed", "exit_code": 1}},
            "decisions": [{"stage": "difficulty", "verdict": "drop", "reason": "truncated", "detail": None}],
        }
    )
    return from_records(records)


NAMES = [*ROWS, "code_that_ran"]


def test_the_selection() -> None:
    table = _table()
    local, left_local = rows_to_judge(table, remote=False)
    remote, left_remote = rows_to_judge(table, remote=True)
    assert [NAMES[i] for i in local] == ["live", "too_easy", "too_easy_with_reference", "code_that_ran"]
    assert [NAMES[i] for i in remote] == ["live", "too_easy_with_reference", "code_that_ran"]
    # rows dropped before difficulty are not the panel's anyway (judged_rows): not counted as left out
    assert left_local == {"truncated": 1}
    assert left_remote == {"truncated": 1, "difficulty diagnostic on a remote engine": 1}


@pytest.mark.parametrize("remote", [False, True])
def test_the_panel_spends_nothing_on_rows_no_judge_can_change(
    home: Path, tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch, remote: bool
) -> None:
    """The real asset and panel; ``remote`` stands for a judge on openai/vllm (PanelResource.remote)."""
    monkeypatch.setattr(PanelResource, "remote", lambda self: remote)
    AssetStore(str(home)).write("difficulty_scored", _table(), "b")
    config = tmp_path / "factory.yaml"
    config.write_text(
        f"engines:\n  generator: {{model: {tiny_model}}}\n"
        f"judges:\n  - {{name: tiny, type: llm, engine: {{model: {tiny_model}}}, max_tokens: 8}}\n"
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("batch", ["b"])
    upstream = dg.AssetSpec("difficulty_scored", partitions_def=batch_partitions).with_io_manager_key(
        "samples_io"
    )
    result = dg.materialize(
        [upstream, judged_samples],
        instance=instance,
        partition_key="b",
        resources=factory_resources(str(config), str(home)),
    )
    assert result.success
    meta = result.asset_materializations_for_node("judged_samples")[0].metadata
    judged = {r["sample_id"]: r for r in AssetStore(str(home)).read("judged_samples", "b").to_pylist()}
    voted = {
        NAMES[i]
        for i, sid in enumerate(_table().column("sample_id").to_pylist())
        if any(v["judge"] == "tiny" for v in (judged[sid]["scores"] or {}).get("judges") or [])
    }
    expected = {"live", "too_easy_with_reference", "code_that_ran"} | (set() if remote else {"too_easy"})
    assert voted == expected
    assert len(judged) == len(NAMES)  # every row comes back, the ones left out unchanged
    assert meta["judged_rows"].value == len(expected)
    assert "truncated" in meta["not_judged"].value
