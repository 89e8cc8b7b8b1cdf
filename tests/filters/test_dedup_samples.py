"""dedup_samples builds its scores and decisions as columns: every row's values against the
row-level rules, on a corpus with near-duplicate families, exact copies, human references, rows
dropped upstream and a published index."""

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from ptfactory.filters.dedup.core import DedupConfig, compute_signatures, deduplicate
from ptfactory.filters.dedup.index import PublishedIndex
from ptfactory.filters.dedup.samples import dedup_samples
from ptfactory.storage.schema import add_decision, from_records, row_texts, sample_id
from tests.filters.corpus import build

CONFIG = DedupConfig()


def _table(texts: list[str]) -> pa.Table:
    records: list[dict[str, Any]] = []
    for i, text in enumerate([*texts, texts[0].upper(), texts[5] + "  "]):  # two exact copies
        messages = [{"role": "user", "content": "Rewrite."}, {"role": "assistant", "content": text}]
        provenance = None if i % 11 == 4 else {"method": "reference" if i % 7 == 3 else "self_instruct"}
        records.append(
            {
                "sample_id": sample_id("sft", messages) if i % 2 else f"id-{i:03d}",
                "batch": "b1",
                "kind": "sft",
                "messages": messages,
                "provenance": provenance,
                "decisions": [{"stage": "seed", "verdict": "keep", "reason": "ok", "detail": None}],
            }
        )
    table = from_records(records)
    upstream = [i for i in range(len(records)) if i % 9 == 2]
    return add_decision(
        table, "difficulty", ["drop"] * len(upstream), ["too_easy"] * len(upstream), rows=upstream
    )


def _expected(table: pa.Table, index: PublishedIndex | None) -> list[dict[str, Any]]:
    """The rules, row by row: rows dropped upstream untouched; a cluster whose keeper is published
    goes whole; otherwise copies and near duplicates of the keeper drop, naming it."""
    rows = table.to_pylist()
    live = [i for i, r in enumerate(rows) if all(d["verdict"] != "drop" for d in r["decisions"])]
    subset = table.take(live)
    ids = [rows[i]["sample_id"] for i in live]
    method = [(rows[i]["provenance"] or {}).get("method") for i in live]
    order = sorted(range(len(live)), key=lambda k: (method[k] != "reference", ids[k]))
    priority = np.empty(len(live), dtype=np.int64)
    priority[order] = np.arange(len(live))
    result = deduplicate(row_texts(subset), CONFIG, priority)
    published: dict[int, tuple[str, float] | None] = {}
    if index is not None:
        keepers = np.flatnonzero(result.representative)
        published = dict(
            zip(keepers.tolist(), index.query(result.signatures[keepers], exclude_batch="b1"), strict=True)
        )
    out: list[dict[str, Any]] = [{"dedup": None, "decision": None} for _ in rows]
    for position, row in enumerate(live):
        rep = int(result.cluster[position])
        match = published.get(rep)
        size = int((result.cluster == rep).sum())
        score = {
            "cluster_id": rep,
            "representative_id": ids[rep] if match is None else match[0],
            "is_representative": bool(result.representative[position]) and match is None,
            "jaccard": round(float(result.jaccard[position]) if match is None else match[1], 4),
        }
        reason = result.reason[position]
        decision: tuple[str, str, str | None]
        if match is not None:
            decision = ("drop", "near_duplicate_published", f"of published {match[0]} (J={match[1]:.2f})")
        elif reason in ("near_duplicate", "exact_duplicate"):
            decision = ("drop", reason, f"of {ids[rep]} (J={result.jaccard[position]:.2f})")
        else:
            decision = ("keep", reason, f"keeps a cluster of {size}" if reason == "representative" else None)
        out[row] = {"dedup": score, "decision": decision}
    return out


@pytest.mark.parametrize("published", [False, True])
def test_columns_follow_the_row_rules(tmp_path: Path, published: bool) -> None:
    corpus = build(families=12, unrelated=20, seed=5)
    table = _table(corpus.texts)
    index = None
    if published:  # an earlier version holds copies of two families' first texts
        index = PublishedIndex(tmp_path / "index.duckdb", CONFIG)
        firsts = [corpus.family.index(f) for f in (1, 4)]
        texts = [corpus.texts[i] + " again" for i in firsts]
        index.add(["pub-1", "pub-4"], compute_signatures(texts, CONFIG).signatures, "sft", 1, ["b0", "b0"])
    out, stats = dedup_samples(table, CONFIG, index)
    expected = _expected(table, index)
    rows = out.to_pylist()
    before = table.column("decisions").to_pylist()
    reasons = []
    for i, (row, want) in enumerate(zip(rows, expected, strict=True)):
        assert (row["scores"] or {}).get("dedup") == want["dedup"], i
        if want["decision"] is None:  # dropped upstream: the trail as it came
            assert row["decisions"] == before[i]
            continue
        last = row["decisions"][-1]
        assert row["decisions"][:-1] == before[i]
        assert (last["stage"], last["verdict"], last["reason"], last["detail"]) == (
            "dedup",
            *want["decision"],
        )
        reasons.append(last["reason"])
    # the corpus reaches every outcome, so each rule above was exercised
    wanted = {"unique", "representative", "near_duplicate", "exact_duplicate"}
    assert wanted | ({"near_duplicate_published"} if published else set()) <= set(reasons)
    assert stats.rows_out == sum(r in ("unique", "representative") for r in reasons)
    assert sum(stats.dropped.values()) == len(reasons) - stats.rows_out
    clusters = [w["dedup"]["cluster_id"] for w in expected if w["dedup"] is not None]
    assert stats.clusters == sum(clusters.count(c) > 1 for c in set(clusters))


def test_references_are_kept_over_model_copies() -> None:
    text = build(families=1, unrelated=0, seed=2).texts[0]
    messages = [{"role": "user", "content": "Rewrite."}, {"role": "assistant", "content": text}]
    table = from_records(
        [
            {
                "sample_id": "a",
                "batch": "b",
                "kind": "sft",
                "messages": messages,
                "provenance": {"method": "evol"},
            },
            {
                "sample_id": "z",
                "batch": "b",
                "kind": "sft",
                "messages": messages,
                "provenance": {"method": "reference"},
            },
            {"sample_id": "b", "batch": "b", "kind": "sft", "messages": messages, "provenance": None},
        ]
    )
    out, _ = dedup_samples(table, CONFIG)
    kept = [r["sample_id"] for r in out.to_pylist() if r["decisions"][-1]["verdict"] == "keep"]
    assert kept == ["z"]


def test_a_checkable_row_is_kept_over_its_unchecked_copies() -> None:
    """No human reference among them: the row carrying a reference answer (or tests) stays, over
    lower sample ids, so the verifiers keep the one row they can check."""
    text = build(families=1, unrelated=0, seed=3).texts[0]
    messages = [{"role": "user", "content": "Rewrite."}, {"role": "assistant", "content": text}]
    rows: list[dict[str, Any]] = [
        {
            "sample_id": s,
            "batch": "b",
            "kind": "sft",
            "messages": messages,
            "provenance": {"method": "response"},
        }
        for s in ("a", "b", "y")
    ]
    rows[2]["reference"] = {"answer": "12", "source": "answer"}
    out, _ = dedup_samples(from_records(rows), CONFIG)
    kept = [r["sample_id"] for r in out.to_pylist() if r["decisions"][-1]["verdict"] == "keep"]
    assert kept == ["y"]
