"""Non-engine overhead: a synthetic batch through every stage that is not the model or the sandbox.

    python bench/overhead.py [--rows 100000] [--repeats 3] [--json OUT.json]

The engine and the sandbox are replaced by precomputed answers (the rows arrive with their
responses; the judges are three precomputed votes a row), so what is timed is the factory's own
work: dedup (MinHash hashing reported apart), the panel's aggregation of the votes, routing,
curation (1 % of the rows carry an expert label), assembly, and publish (with the staged audit's
table checks; Parquet compression reported apart, as the time of writing the same shards with
bare pyarrow). Each stage's median over ``--repeats`` runs, rows/s, and the total beside the
engine time the same batch would take at 5,000 output tokens/s (output tokens counted with the
bundled SmolLM2 tokenizer). Goals (issue 15 item 3): each stage's own overhead <= 2 s per 100k
rows, the total <= 10 % of that engine time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.annotators.curation import curate
from ptfactory.annotators.judges.base import Judge, Vote
from ptfactory.annotators.judges.panel import Panel
from ptfactory.annotators.labelstudio.ledger import EVENT_SCHEMA
from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.filters.dedup.core import DedupConfig, compute_signatures
from ptfactory.filters.dedup.samples import dedup_samples
from ptfactory.storage.assemble import assemble_sft
from ptfactory.storage.audit import Audit, schema_valid, unique_ids
from ptfactory.storage.schema import row_texts
from ptfactory.storage.shards import PARQUET_OPTIONS
from ptfactory.storage.versions import DatasetStore

_spec = importlib.util.spec_from_file_location("bench_storage", Path(__file__).with_name("storage.py"))
assert _spec is not None and _spec.loader is not None
_bench_storage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench_storage)

ENGINE_TOKENS_PER_S = 5_000


@dataclass
class Precomputed(Judge):
    """A judge whose votes were computed before the run (what the model would have said)."""

    offset: float = 0.0

    @property
    def model(self) -> str:
        return "precomputed"

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        votes = []
        for row in rows:
            # a spread of scores over 1-10 that depends on the row, so routing has all four outcomes
            score = 1 + (zlib.crc32(row["sample_id"].encode()) % 900) / 100 + self.offset
            score = min(10.0, max(1.0, score))
            votes.append(Vote(self.name, self.model, round(score, 2), "accept" if score >= 7 else "reject"))
        return votes


def _events(routed: pa.Table, share: float) -> pa.Table:
    """Expert labels (Label Studio's webhook events) for rows sent to review, ``share`` of the batch."""
    sent = [r["sample_id"] for r in routed.to_pylist() if r["decisions"][-1]["verdict"] == "route"]
    ids = sent[: max(1, int(routed.num_rows * share))]
    result = json.dumps([{"from_name": "verdict", "type": "choices", "value": {"choices": ["accept"]}}])
    columns: dict[str, list[Any]] = {
        "seq": list(range(len(ids))),
        "event": ["created"] * len(ids),
        "annotation_id": list(range(len(ids))),
        "task_id": list(range(len(ids))),
        "project_id": [1] * len(ids),
        "queue": ["sft"] * len(ids),
        "sample_id": ids,
        "annotator": ["expert@example.com"] * len(ids),
        "result": [result] * len(ids),
        "was_cancelled": [False] * len(ids),
        "created_at": ["2026-12-01T00:00:00Z"] * len(ids),
        "updated_at": ["2026-12-01T00:00:00Z"] * len(ids),
        "lead_time_s": [12.0] * len(ids),
        "pulled_at": [0.0] * len(ids),
    }
    return pa.table(columns, schema=EVENT_SCHEMA)


def _median(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), out


def _output_tokens(table: pa.Table) -> int:
    from transformers import AutoTokenizer

    from tests.models import bundled_model

    tokenizer = AutoTokenizer.from_pretrained(str(bundled_model()))
    answers = [m[-1]["content"] for m in table.column("messages").to_pylist()]
    return sum(len(ids) for ids in tokenizer(answers, add_special_tokens=False)["input_ids"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    table = _bench_storage.make_table(args.rows)
    dedup = DedupConfig()
    routing = RoutingConfig(review_budget=args.rows // 20)
    panel = Panel([Precomputed("a"), Precomputed("b", offset=0.5), Precomputed("c", offset=-0.5)])
    rows: dict[str, tuple[float, float | None]] = {}  # stage -> (seconds, seconds of which are not its own)

    hashing, _ = _median(lambda: compute_signatures(row_texts(table), dedup), args.repeats)
    seconds, (deduped, _stats) = _median(lambda: dedup_samples(table, dedup), args.repeats)
    rows["dedup"] = (seconds, hashing)
    seconds, (judged, _report) = _median(lambda: panel.judge_table(deduped), args.repeats)
    rows["judge aggregate"] = (seconds, None)
    seconds, (routed, _counts) = _median(lambda: route(judged, routing, batch="b1"), args.repeats)
    rows["routing"] = (seconds, None)
    events = _events(routed, 0.01)
    seconds, curated = _median(lambda: curate(routed, events), args.repeats)
    rows["curation"] = (seconds, None)
    seconds, assembled = _median(lambda: assemble_sft(curated.table), args.repeats)
    rows["assemble"] = (seconds, None)

    published = assembled.table
    with tempfile.TemporaryDirectory() as scratch:

        def publish() -> None:
            DatasetStore(tempfile.mkdtemp(dir=scratch)).publish(
                "overhead",
                published,
                kind="sft",
                config_hash="bench",
                batches=["b1"],
                audit=Audit([schema_valid, unique_ids]),
            )

        def compress() -> None:
            out = Path(tempfile.mkdtemp(dir=scratch))
            for start in range(0, published.num_rows, 50_000):
                pq.write_table(published.slice(start, 50_000), out / f"{start}.parquet", **PARQUET_OPTIONS)

        compression, _ = _median(compress, args.repeats)
        seconds, _ = _median(publish, args.repeats)
        rows["publish"] = (seconds, compression)

    tokens = _output_tokens(table)
    engine_s = tokens / ENGINE_TOKENS_PER_S
    scale = 100_000 / args.rows
    print(
        f"{args.rows:,} rows, median of {args.repeats} runs; engine and sandbox replaced by precomputed answers"
    )
    print(f"{'stage':<16} {'seconds':>8} {'rows/s':>10} {'own s/100k':>11} {'apart':>26}")
    own_total = 0.0
    report: dict[str, Any] = {"rows": args.rows, "stages": {}}
    for stage, (seconds, apart) in rows.items():
        own = seconds - (apart or 0.0)
        own_total += own
        label = {"dedup": "MinHash hashing", "publish": "Parquet compression"}.get(stage, "")
        extra = f"{label} {apart:.2f}s" if apart is not None else ""
        print(f"{stage:<16} {seconds:>8.2f} {args.rows / seconds:>10,.0f} {own * scale:>11.2f} {extra:>26}")
        report["stages"][stage] = {"seconds": seconds, "apart_s": apart, "own_s_per_100k": own * scale}
    total = sum(s for s, _ in rows.values())
    print(
        f"total {total:.2f}s ({own_total:.2f}s own); the engine at {ENGINE_TOKENS_PER_S:,} tokens/s would take "
        f"{engine_s:.0f}s for these {tokens:,} output tokens: overhead {total / engine_s:.1%} "
        f"({own_total / engine_s:.1%} own)"
    )
    report.update(total_s=total, own_s=own_total, output_tokens=tokens, engine_s=engine_s)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
