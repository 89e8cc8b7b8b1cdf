"""Non-engine overhead: a synthetic batch through every stage that is not the model or the sandbox.

    python bench/overhead.py [--rows 100000] [--repeats 3] [--json OUT.json]

The engine and the sandbox are replaced by precomputed answers (the rows arrive with their
responses and executions; the judges' votes are computed before the clock starts and looked up;
the pairwise judges' letter probabilities are a hash of each prompt), so what is timed is the
factory's own work:

- dedup (MinHash hashing reported apart);
- judge aggregate: the panel turning three votes a row into scores and a decision (its judges read
  ``sample_id`` and ``messages``, what an LLM judge's prompt needs), and the difficulty gate's
  report (rows the difficulty stage dropped are judged too: 10 % of the batch);
- preference candidates: each instruction's best and worst answer (two answers an instruction),
  compared by two pairwise judges in both orders, made into preference rows. The engine stand-in's
  time (a hash of each prompt's text, in place of the model's letter probabilities) is set apart,
  as the engine's own; the judges' prompt rendering is shown, not subtracted: the issue sets apart
  only hashing and compression;
- routing, with the waiting rows of an earlier batch (a fifth of this one's size) competing for the
  review budget and the blind audit on;
- curation: 1 % of the rows carry an expert label (accepts, rejects, corrections, A/B choices), 5 %
  are code rows whose pass-over-fail pairs are made;
- assembly, and publish (with the staged audit's table checks; Parquet compression reported apart,
  as the time of writing the same shards with bare pyarrow).

Each stage's median over ``--repeats`` runs, rows/s, and the total beside the engine time the same
batch would take at 5,000 output tokens/s (output tokens counted with the bundled SmolLM2
tokenizer). Goals (issue 15 item 3): each stage's own overhead <= 2 s per 100k rows, the total
<= 10 % of that engine time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.annotators.curation import curate
from ptfactory.annotators.judges.base import Judge, Vote
from ptfactory.annotators.judges.llm import LLMJudge
from ptfactory.annotators.judges.pairwise import PairwiseJudge, candidate_pairs, preference_candidates
from ptfactory.annotators.judges.panel import Panel, means_by_drop_reason, pair_candidate_rows
from ptfactory.annotators.labelstudio.ledger import EVENT_SCHEMA
from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.filters.dedup.core import DedupConfig, compute_signatures
from ptfactory.filters.dedup.samples import dedup_samples
from ptfactory.storage.assemble import assemble_sft
from ptfactory.storage.audit import Audit, schema_valid, unique_ids
from ptfactory.storage.schema import (
    SAMPLE_SCHEMA,
    add_decision,
    conform,
    prompt_of,
    response_of,
    row_texts,
)
from ptfactory.storage.shards import PARQUET_OPTIONS
from ptfactory.storage.versions import DatasetStore

_spec = importlib.util.spec_from_file_location("bench_storage", Path(__file__).with_name("storage.py"))
assert _spec is not None and _spec.loader is not None
_bench_storage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench_storage)

ENGINE_TOKENS_PER_S = 5_000
PAIR_MARGIN = 2.0  # factory.yaml datasets.pair_margin's default


def _score(sample_id: str, offset: float) -> float:
    """A spread of scores over 1-10 that depends on the row, so routing has all four outcomes."""
    return min(10.0, max(1.0, round(1 + (zlib.crc32(sample_id.encode()) % 900) / 100 + offset, 2)))


@dataclass
class Precomputed(Judge):
    """A judge whose votes were computed before the run (what the model would have said), looked up
    by sample_id; it reads what an LLM judge's prompt needs."""

    offset: float = 0.0
    votes: dict[str, Vote] = field(default_factory=dict)
    reads: tuple[str, ...] = ("sample_id", "messages")

    @property
    def model(self) -> str:
        return "precomputed"

    def prepare(self, ids: Sequence[str]) -> None:
        for sid in ids:
            score = _score(sid, self.offset)
            self.votes[sid] = Vote(self.name, self.model, score, "accept" if score >= 7 else "reject")

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        return [self.votes[row["sample_id"]] for row in rows]


@dataclass
class PrecomputedLetters:
    """The engine behind a pairwise judge: P(A), P(B) for each prompt as the model would have given
    them (a function of the prompt's text, so both orders of a pair can disagree)."""

    model_id: str = "precomputed"
    backend: str = "precomputed"
    supports_json_schema: bool = False
    seconds: float = 0.0  # spent standing in for the engine: set apart from the stage's own time

    def choice_logprobs(self, prompts: Sequence[Any], choices: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        out = []
        for prompt in prompts:
            text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
            p = 0.05 + 0.9 * (zlib.crc32(text.encode()) % 1000) / 1000
            out.append([math.log(p), math.log(1 - p)])
        self.seconds += time.perf_counter() - started
        return out


def _prepare(table: pa.Table) -> pa.Table:
    """The synthetic batch as it reaches dedup: two answers an instruction (rows 2k and 2k+1 share a
    parent id), 5 % code rows with an execution (pairs of them: one passed, one failed), and 10 %
    of the rows dropped by the difficulty stage (too easy, too hard)."""
    n = table.num_rows
    index = np.arange(n)
    provenance = table.column("provenance").combine_chunks()
    fields = {f.name: provenance.field(f.name) for f in provenance.type}
    fields["parent_id"] = pa.array([f"p{i // 2}" for i in range(n)], pa.string())
    merged = pa.StructArray.from_arrays(list(fields.values()), names=list(fields))
    table = table.set_column(
        table.schema.get_field_index("provenance"), "provenance", merged.cast(provenance.type)
    )
    code = (index // 2) % 20 == 7
    kinds = np.where(code, "code", "sft")
    table = table.set_column(
        table.schema.get_field_index("kind"), "kind", pa.array(kinds.tolist(), pa.string())
    )
    for name, value in (("tests", "assert f() == 1"), ("entry_point", "f")):
        column = pa.array([value if c else None for c in code.tolist()], pa.string())
        table = table.set_column(table.schema.get_field_index(name), name, column)
    status = [
        {"execution": {"status": "passed" if i % 2 else "failed"}} if c else None for i, c in enumerate(code)
    ]
    scores = pa.array(status, SAMPLE_SCHEMA.field("scores").type)
    table = table.set_column(table.schema.get_field_index("scores"), "scores", scores)
    hard = np.flatnonzero(index % 10 == 3)
    reasons = ["too_easy" if i % 20 == 3 else "too_hard" for i in hard.tolist()]
    return add_decision(table, "difficulty", ["drop"] * len(hard), reasons, rows=hard.tolist())


def _earlier(judged: pa.Table, rows: int, routing: RoutingConfig) -> pa.Table:
    """An earlier batch's routed output: ``rows`` other rows, its review budget spent, so its
    disputed rows wait for this batch's."""
    some = judged.slice(0, rows)
    ids = pc.binary_join_element_wise(some.column("sample_id"), "earlier", "-")
    some = some.set_column(0, "sample_id", ids).set_column(1, "batch", pa.array(["b0"] * rows, pa.string()))
    spent = RoutingConfig(review_budget=0, audit_rate=routing.audit_rate)
    return route(some, spent, batch="b0")[0]


def _events(routed: pa.Table, share: float) -> pa.Table:
    """Expert labels (Label Studio's webhook events) for rows sent to review, ``share`` of the batch:
    accepts, a tenth rejects and a tenth corrections; preference rows get an A/B choice."""
    last = [t[-1]["verdict"] if t else None for t in routed.column("decisions").to_pylist()]
    ids, kinds = routed.column("sample_id").to_pylist(), routed.column("kind").to_pylist()
    sent = [(i, k) for i, k, v in zip(ids, kinds, last, strict=True) if v == "route"]
    want = max(1, int(routed.num_rows * share))
    sent = sent[:: max(1, len(sent) // want)][:want]  # spread over the queue: sft and preference rows
    results = []
    for n, (_, kind) in enumerate(sent):
        if kind == "preference":
            result = [{"from_name": "preference", "value": {"choices": ["AB"[n % 2]]}}]
        elif n % 10 == 1:
            result = [{"from_name": "verdict", "value": {"choices": ["reject"]}}]
        elif n % 10 == 2:
            result = [
                {"from_name": "verdict", "value": {"choices": ["accept"]}},
                {"from_name": "corrected", "value": {"text": [f"a corrected answer {n}"]}},
            ]
        else:
            result = [{"from_name": "verdict", "type": "choices", "value": {"choices": ["accept"]}}]
        results.append(json.dumps(result))
    count = len(sent)
    columns: dict[str, list[Any]] = {
        "seq": list(range(count)),
        "event": ["created"] * count,
        "annotation_id": list(range(count)),
        "task_id": list(range(count)),
        "project_id": [1] * count,
        "queue": ["sft"] * count,
        "sample_id": [sid for sid, _ in sent],
        "annotator": ["expert@example.com"] * count,
        "result": results,
        "was_cancelled": [False] * count,
        "created_at": ["2026-12-01T00:00:00Z"] * count,
        "updated_at": ["2026-12-01T00:00:00Z"] * count,
        "lead_time_s": [12.0] * count,
        "pulled_at": [0.0] * count,
    }
    return pa.table(columns, schema=EVENT_SCHEMA)


def _pick(judged: pa.Table) -> list[dict[str, Any]]:
    """The rows the judging asset picks preference candidates from, as dicts."""
    rows: list[dict[str, Any]] = pair_candidate_rows(judged, PAIR_MARGIN)
    return rows


def _candidates(judged: pa.Table, pairwise: list[LLMJudge], panel: Panel) -> pa.Table:
    """What the judging asset does after the panel: the preference candidates (the rows it picks
    them from; the comparisons; the rows), appended to the batch. At a commit before the table
    builder (annotators/judges/pair_table.py), the row-by-row builder it replaced."""
    table_builder = importlib.util.find_spec("ptfactory.annotators.judges.pair_table")
    if table_builder is not None:
        from ptfactory.annotators.judges.pair_table import preference_candidate_table

        built = preference_candidate_table(judged, pairwise, PAIR_MARGIN, panel.weights, frozenset())
        return pa.concat_tables([conform(judged), built.table]) if built.table is not None else judged
    report = preference_candidates(_pick(judged), pairwise, PAIR_MARGIN, panel.weights, frozenset())
    if not report.rows:
        return judged
    return pa.concat_tables([conform(judged), pa.Table.from_pylist(report.rows, schema=SAMPLE_SCHEMA)])


def _rendering(judged: pa.Table, pairwise: list[LLMJudge]) -> float:
    """The pairwise judges' prompts alone (both orders of every pair), timed once: their own work,
    as rendering a prompt is the engine's client's, not the factory's bookkeeping."""
    rows = _pick(judged)
    pairs = candidate_pairs(rows, PAIR_MARGIN)
    started = time.perf_counter()
    for judge in pairwise:
        compare = PairwiseJudge(judge)
        for best, worst in pairs:
            instruction = prompt_of(rows[best]["messages"])
            a, b = response_of(rows[best]["messages"]), response_of(rows[worst]["messages"])
            compare._prompt(instruction, a, b)
            compare._prompt(instruction, b, a)
    return time.perf_counter() - started


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

    table = _prepare(_bench_storage.make_table(args.rows))
    dedup = DedupConfig()
    routing = RoutingConfig(review_budget=args.rows // 20)
    judges = [Precomputed("a"), Precomputed("b", offset=0.5), Precomputed("c", offset=-0.5)]
    ids = table.column("sample_id").to_pylist()
    for judge in judges:
        judge.prepare([*ids, *(f"{sid}-earlier" for sid in ids[: args.rows // 5])])
    panel = Panel(list(judges))
    pairwise = [LLMJudge(name, engine=PrecomputedLetters(model_id=name)) for name in ("pa", "pb")]  # type: ignore[arg-type]
    rows: dict[str, tuple[float, float | None]] = {}  # stage -> (seconds, seconds of which are not its own)

    hashing, _ = _median(lambda: compute_signatures(row_texts(table), dedup), args.repeats)
    seconds, (deduped, _stats) = _median(lambda: dedup_samples(table, dedup), args.repeats)
    rows["dedup"] = (seconds, hashing)

    def judge() -> pa.Table:
        judged, _report = panel.judge_table(deduped)
        means_by_drop_reason(judged)
        return judged

    seconds, judged = _median(judge, args.repeats)
    rows["judge aggregate"] = (seconds, None)
    rendering = _rendering(judged, pairwise)
    stand_in: list[float] = []  # each run's engine stand-in seconds

    def candidates_run() -> pa.Table:
        engines = [j.engine for j in pairwise]
        before = sum(e.seconds for e in engines)  # type: ignore[union-attr]
        out = _candidates(judged, pairwise, panel)
        stand_in.append(sum(e.seconds for e in engines) - before)  # type: ignore[union-attr]
        return out

    seconds, candidates = _median(candidates_run, args.repeats)
    rows["preference candidates"] = (seconds, statistics.median(stand_in))
    shown = {"preference candidates": f"prompt rendering {rendering:.2f}s"}
    earlier = _earlier(judged, args.rows // 5, routing)
    seconds, (routed, _counts) = _median(
        lambda: route(candidates, routing, batch="b1", earlier=earlier, order=["b0"]), args.repeats
    )
    rows["routing"] = (seconds, None)
    events = _events(routed, 0.01)
    history = pa.concat_tables([conform(earlier), conform(routed)])
    seconds, curated = _median(lambda: curate(history, events), args.repeats)
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
                batches=["b0", "b1"],
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
        f"{args.rows:,} rows (+{args.rows // 5:,} earlier rows at routing and curation), median of "
        f"{args.repeats} runs; engine and sandbox replaced by precomputed answers"
    )
    print(f"{'stage':<22} {'seconds':>8} {'rows/s':>10} {'own s/100k':>11} {'apart':>30}")
    own_total = 0.0
    report: dict[str, Any] = {"rows": args.rows, "stages": {}}
    labels = {
        "dedup": "MinHash hashing",
        "publish": "Parquet compression",
        "preference candidates": "engine stand-in",
    }
    for stage, (seconds, apart) in rows.items():
        # MinHash hashing and Parquet compression are set apart (issue 15), and the engine
        # stand-in's time; prompt rendering is only shown (of which: inside the own time)
        own = seconds - (apart or 0.0)
        own_total += own
        extra = f"{labels.get(stage, '')} {apart:.2f}s" if apart is not None else ""
        extra += f"; of which {shown[stage]}" if stage in shown else ""
        print(f"{stage:<22} {seconds:>8.2f} {args.rows / seconds:>10,.0f} {own * scale:>11.2f} {extra:>30}")
        report["stages"][stage] = {"seconds": seconds, "apart_s": apart, "own_s_per_100k": own * scale}
    total = sum(s for s, _ in rows.values())
    print(
        f"total {total:.2f}s ({own_total:.2f}s own); the engine at {ENGINE_TOKENS_PER_S:,} tokens/s would take "
        f"{engine_s:.0f}s for these {tokens:,} output tokens: overhead {total / engine_s:.1%} "
        f"({own_total / engine_s:.1%} own)"
    )
    added = candidates.num_rows - judged.num_rows
    print(
        f"the batch: {added:,} preference candidates; routing {dict(_counts)}; "
        f"curation {dict(curated.counts)}"
    )
    report.update(total_s=total, own_s=own_total, output_tokens=tokens, engine_s=engine_s)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
