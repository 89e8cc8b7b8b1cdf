"""Judge bench: how well each judge, the panel, and the panel without its verifiers tell right from
wrong, on human-written pairs and on rows the factory itself generated.

    python bench/judges.py [--config demo/factory.yaml] [--rows 8] [--generated 10 --samples 3]
                           [--sources gsm8k,humaneval,writingbench,gen-math,gen-code,gen-procedural]
                           [--json OUT] [--reuse-cache]

Sources (bench/judge_data.py, bench/judge_generated.py):

- human pairs: ``gsm8k`` (a reference solution vs the same with a wrong final number; the reference
  answer is given to the answer verifier), ``humaneval`` (canonical solution vs a one-token mutant
  that fails; the tests go to the code verifier), ``writingbench`` (the generator's answer to the
  query vs its answer to another query; no verifier applies). Labels: the pair's.
- generated rows: ``gen-math``, ``gen-code``, ``gen-procedural``: the bundled generator's own answers,
  labelled by the verifier (pass 1, fail 0; no_answer and abstentions unlabelled). These rows carry
  ``provenance.model``, so a judge of the generator's family abstains (``self``).

Every table goes through ``score_table`` (what ``ptf judge`` runs: verifiers first, then the judges).
Printed per source and member: AUC with a 95 % stratified bootstrap interval over the labelled rows
where its vote counted, the rows (+/-), the share of its votes that counted, self-abstentions, the
weight it would earn on the source (2 AUC - 1, 0 under 0.55) and its seconds per 100 rows. Then the
panel (``judge_mean``, verifiers included), the panel **without verifiers** (what an unverifiable
row gets: the judges' weighted mean, the weights measured on the other half of the source's items,
cross-fitted so no row is scored with weights fitted on itself), and the judges' equal mean (the
panel before issue 37). Judges read a fresh response cache (``--reuse-cache``: the project's) so
their timings are real; the generator's replies are cached under .ptf/bench-cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.judge_data import gsm8k_pairs, humaneval_pairs, to_table, writingbench_pairs
from bench.judge_generated import GENERATED, generated_table
from ptfactory.annotators.judges.base import Judge, Vote
from ptfactory.annotators.judges.identity import independence_key
from ptfactory.annotators.judges.standalone import score_table
from ptfactory.annotators.judges.vote_columns import VoteColumns, aggregate
from ptfactory.annotators.judges.weights import auc, auc_interval, judge_weight, near_constant
from ptfactory.config import load_config
from ptfactory.engines.spec import EngineSpec, build_engine
from ptfactory.filters.execution import Limits, open_sandbox
from ptfactory.filters.verify import reference_answer
from ptfactory.panel_config import build_panel

HUMAN = ("gsm8k", "humaneval", "writingbench")
SOURCES = HUMAN + GENERATED
REPO = Path(__file__).resolve().parent.parent
Floats = npt.NDArray[np.float64]
WARM_UP: list[dict[str, object]] = [
    {"sample_id": "warm-up", "kind": "sft", "scores": None, "tests": None, "entry_point": None, "provenance": None,
     "messages": [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi!"}]}
]  # fmt: skip


class Engines:
    """One engine per spec, on the given response cache."""

    def __init__(self, cache: Path) -> None:
        self.cache, self.made = cache, {}  # type: ignore[var-annotated]

    def __call__(self, name: str, spec: EngineSpec) -> Any:
        key = spec.model_dump_json()
        if key not in self.made:
            self.made[key] = build_engine(spec, self.cache)
        return self.made[key]

    def close(self) -> None:
        for engine in self.made.values():
            engine.close()


def _timed(judges: list[Judge]) -> dict[str, float]:
    """Seconds each judge spends voting (wrapped in place)."""
    seconds = {j.name: 0.0 for j in judges}
    for judge in judges:

        def timed(rows: Any, _judge: Callable[..., Any] = judge.judge, _name: str = judge.name) -> Any:
            started = time.perf_counter()
            try:
                return _judge(rows)
            finally:
                seconds[_name] += time.perf_counter() - started

        judge.judge = timed  # type: ignore[method-assign]
    return seconds


def _human(source: str, rows: int, generator: Any, sandbox: Any) -> pa.Table | None:
    if source == "gsm8k":
        pairs = gsm8k_pairs(rows)
    elif source == "humaneval":
        pairs = humaneval_pairs(rows, sandbox, Limits(timeout_s=5))
    else:
        pairs = writingbench_pairs(rows, generator)
    if not pairs:
        return None
    table = to_table(pairs)
    gold = [
        reference_answer(g, stated=False) if source == "gsm8k" else None
        for g in table.column("response").to_pylist()
    ]
    gold = [gold[2 * (k // 2)] for k in range(len(gold))]  # the pair's good side states it
    table = table.append_column("gold", pa.array(gold, pa.string()))
    if source == "writingbench":  # the generator wrote both sides: its family's judge abstains
        model = [{"method": "response", "model": generator.model_id}] * table.num_rows
        table = table.append_column("provenance", pa.array(model))
    return table


def _labels(source: str, scored: pa.Table, verifiers: list[str]) -> Floats:
    """1 / 0 per row, NaN unlabelled: the pair's label, or (generated rows) the verifiers' verdict."""
    if source in HUMAN:
        return np.asarray(scored.column("label").to_pylist(), np.float64)
    out = np.full(scored.num_rows, np.nan)
    said = [scored.column(f"verdict_{v}").to_pylist() for v in verifiers]
    for i in range(scored.num_rows):
        verdicts = {column[i] for column in said}
        out[i] = 0.0 if "fail" in verdicts else 1.0 if "pass" in verdicts else np.nan
    return out


def _auc_row(name: str, values: Floats, labels: Floats) -> dict[str, Any]:
    use = ~np.isnan(values) & ~np.isnan(labels)
    pos, neg = int((labels[use] == 1).sum()), int((labels[use] == 0).sum())
    row: dict[str, Any] = {"member": name, "pos": pos, "neg": neg, "auc": None, "low": None, "high": None}
    if pos and neg:
        row["auc"] = auc(values[use], labels[use] == 1)
        interval = auc_interval(values[use], labels[use] == 1)
        row["low"], row["high"] = interval if interval else (None, None)
    return row


def _fold(items: list[str]) -> npt.NDArray[np.int64]:
    return np.array([int(hashlib.blake2b(i.encode(), digest_size=2).hexdigest(), 16) % 2 for i in items])


def _without_verifiers(scored: pa.Table, judges: list[Judge], labels: Floats, items: list[str]) -> Floats:
    """The judges' weighted mean per row, each fold's weights measured on the other fold's labels
    (what a row no verifier covers gets from weights the batch's verified rows earned)."""
    scores = np.array(
        [[np.nan if v is None else v for v in scored.column(f"judge_{j.name}").to_pylist()] for j in judges]
    ).reshape(len(judges), scored.num_rows)
    fold, out = _fold(items), np.full(scored.num_rows, np.nan)
    keys = [independence_key(j.family, j.method) for j in judges]
    for f in (0, 1):
        train = (fold != f) & ~np.isnan(labels)
        weights = [
            judge_weight(j.name, scores[k][train], labels[train] == 1, None) for k, j in enumerate(judges)
        ]
        here = np.flatnonzero(fold == f)
        votes = VoteColumns.of(
            [
                [Vote(j.name, "", None if np.isnan(s) else float(s), "") for s in scores[k][here]]
                for k, j in enumerate(judges)
            ]
        )
        agg = aggregate(
            votes,
            [w.weight for w in weights],
            in_batch=[not near_constant(scores[k][fold != f]) for k in range(len(judges))],
            unmeasured=[w.unmeasured for w in weights],
            keys=keys,
        )
        out[here] = np.where(agg.present, agg.mean, np.nan)
    return out


def _score_source(source: str, table: pa.Table, panel: Any, seconds: dict[str, float]) -> dict[str, Any]:
    spent = dict(seconds)
    before = {j.name: (j.stats.votes, j.stats.unparsed, j.stats.abstained) for j in panel.judges}
    started = time.perf_counter()
    scored, report = score_table(
        table, panel, prompt_column="prompt", response_column="response",
        reference_column="gold" if "gold" in table.column_names else None,
    )  # fmt: skip
    wall = time.perf_counter() - started
    verifiers = panel.verifiers.names if panel.verifiers else []
    labels = _labels(source, scored, verifiers)
    items = [f"{i}" for i in (scored.column("item").to_pylist())]
    results = []
    for name in verifiers:
        values = np.array([np.nan if v is None else v for v in scored.column(f"judge_{name}").to_pylist()])
        if np.isnan(values).all():
            continue
        results.append(
            {**_auc_row(f"{name} (verifier)", values, labels), "counted": float(np.mean(~np.isnan(values)))}
        )
    for judge in panel.judges:
        values = np.array(
            [np.nan if v is None else v for v in scored.column(f"judge_{judge.name}").to_pylist()]
        )
        votes, unparsed, abstained = (a - b for a, b in zip(
            (judge.stats.votes, judge.stats.unparsed, judge.stats.abstained), before[judge.name], strict=True))  # fmt: skip
        row = _auc_row(judge.name, values, labels)
        row["counted"] = (votes - unparsed - abstained) / votes if votes else None
        row["self"] = report.self_abstained.get(judge.name, 0)
        row["weight"] = judge_weight(
            judge.name, values[~np.isnan(labels)], labels[~np.isnan(labels)] == 1, None
        ).weight
        row["s_per_100"] = (seconds[judge.name] - spent[judge.name]) / table.num_rows * 100
        results.append(row)
    results += _self_rows(panel, table, scored, labels, report)
    panel_mean = np.array([np.nan if v is None else v for v in scored.column("judge_mean").to_pylist()])
    judge_scores = np.array(
        [
            [np.nan if v is None else v for v in scored.column(f"judge_{j.name}").to_pylist()]
            for j in panel.judges
        ]
    ).reshape(len(panel.judges), scored.num_rows)
    with np.errstate(all="ignore"):
        equal = np.nanmean(judge_scores, axis=0) if len(panel.judges) else np.full(scored.num_rows, np.nan)
    results.append(
        {**_auc_row("panel (with verifiers)", panel_mean, labels), "s_per_100": wall / table.num_rows * 100}
    )
    results.append(
        _auc_row("panel without verifiers", _without_verifiers(scored, panel.judges, labels, items), labels)
    )
    results.append(_auc_row("judges, equal mean", equal, labels))
    unlabelled = int(np.isnan(labels).sum())
    return {"source": source, "rows": scored.num_rows, "unlabelled": unlabelled, "results": results,
            "scored": scored, "seconds": wall, "verdicts": report.verdicts_line()}  # fmt: skip


def _self_rows(
    panel: Any, table: pa.Table, scored: pa.Table, labels: Floats, report: Any
) -> list[dict[str, Any]]:
    """What a judge that abstained on its own family's rows would have said of them (its votes
    asked for anyway, outside the panel): the evidence for the abstention, never a weight."""
    out = []
    for judge in panel.judges:
        if not report.self_abstained.get(judge.name):
            continue
        rows = [
            {"sample_id": str(k), "kind": "sft", "provenance": None,
             "messages": [{"role": "user", "content": p}, {"role": "assistant", "content": r}]}
            for k, (p, r) in enumerate(zip(table.column("prompt").to_pylist(), table.column("response").to_pylist(), strict=True))
        ]  # fmt: skip
        votes = judge._judge(rows)
        values = np.array([v.score if v.counts and v.score is not None else np.nan for v in votes])
        out.append(
            {
                **_auc_row(f"{judge.name} if it graded itself", values, labels),
                "counted": float(np.mean(~np.isnan(values))),
            }
        )
    return out


def _line(row: dict[str, Any]) -> str:
    if row["auc"] is None:
        what = "n/a (abstains: self)" if row.get("self") and not row["pos"] + row["neg"] else "n/a"
        auc_text = f"{what} ({row['pos']}+/{row['neg']}-)"
    else:
        auc_text = f"{row['auc']:.2f} [{row['low']:.2f}, {row['high']:.2f}]"
    counted = f"{row['counted']:.0%}" if row.get("counted") is not None else ""
    weight = f"{row['weight']:.2f}" if row.get("weight") is not None else ""
    timing = f"{row['s_per_100']:.1f}" if row.get("s_per_100") is not None else ""
    return (f"  {row['member']:<28} {auc_text:<26} {row['pos']:>4}/{row['neg']:<4} {counted:>7} "
            f"{row.get('self', '') or '':>5} {weight:>6} {timing:>7}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8, help="human pairs per source (each pair is 2 rows)")
    parser.add_argument("--generated", type=int, default=10, help="items per generated source")
    parser.add_argument("--samples", type=int, default=3, help="the generator's replies per item")
    parser.add_argument(
        "--config", type=Path, default=Path("factory.yaml"), help="factory.yaml with the panel"
    )
    parser.add_argument("--sources", default=",".join(SOURCES), help="comma-separated: " + ", ".join(SOURCES))
    parser.add_argument("--json", type=Path, help="save the results and the scored rows here")
    parser.add_argument("--reuse-cache", action="store_true", help="judges read the project's response cache")
    args = parser.parse_args()
    begun = time.perf_counter()
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown:
        raise SystemExit(f"unknown source(s) {', '.join(unknown)}; sources: {', '.join(SOURCES)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = load_config(args.config.resolve(), required=args.config != Path("factory.yaml"))
    scratch = tempfile.TemporaryDirectory(prefix="ptf-judge-bench-")
    gen_engines = Engines(REPO / ".ptf" / "bench-cache" / "judges-gen.sqlite")
    generator = gen_engines("generator", config.engines.generator)
    judge_cache = (
        REPO / ".ptf" / "cache" / "responses.sqlite" if args.reuse_cache else Path(scratch.name) / "r.sqlite"
    )
    engines = Engines(judge_cache)
    limits = Limits(timeout_s=5)
    settings = config.sandbox

    def sandbox() -> Any:
        return open_sandbox(limits, settings.workers, settings.backend)

    panel = build_panel(
        config.judges,
        config.judging,
        config.engines.generator,
        engine=engines,
        sandbox=sandbox,
        limits=limits,
    )
    loading = time.perf_counter()
    panel.vote(WARM_UP)  # models load here, not inside the first source's timings
    loaded = time.perf_counter() - loading
    seconds = _timed(panel.judges)
    members = ", ".join(
        [
            *(panel.verifiers.names if panel.verifiers else []),
            *(f"{j.name} ({j.model})" for j in panel.judges),
        ]
    )
    print(
        f"judge bench: panel {members}; config {args.config}; generator {generator.model_id}; models loaded in {loaded:.0f} s"
    )
    print("AUC: label 1 vs 0 over the labelled rows where the member's vote counted [95% stratified bootstrap]; self: "
          "abstentions on its own family's rows; weight: 2 AUC - 1 (0 under 0.55); s/100: seconds per 100 rows")  # fmt: skip
    human_sandbox = sandbox() if "humaneval" in sources else None
    outcomes = []
    try:
        for source in sources:
            made = time.perf_counter()
            if source in HUMAN:
                table = _human(source, args.rows, generator, human_sandbox)
            else:
                table = generated_table(source, args.generated, args.samples, generator)
            if table is None or not table.num_rows:
                print(f"\n{source}: no rows could be built; skipped")
                continue
            built = time.perf_counter() - made
            outcome = _score_source(source, table, panel, seconds)
            outcomes.append(outcome)
            print(f"\n{source}: {outcome['rows']} rows ({outcome['unlabelled']} unlabelled); data {built:.0f} s, judging "
                  f"{outcome['seconds']:.0f} s; verifiers: {outcome['verdicts']}")  # fmt: skip
            print(
                f"  {'member':<28} {'AUC [95% CI]':<26} {'+/-':>9} {'counted':>7} {'self':>5} {'weight':>6} {'s/100':>7}"
            )
            for row in outcome["results"]:
                print(_line(row))
    finally:
        if human_sandbox is not None:
            human_sandbox.close()
        engines.close()
        gen_engines.close()
        scratch.cleanup()
    print(f"\ntotal {time.perf_counter() - begun:.0f} s")
    if args.json:
        body = [{k: v for k, v in o.items() if k != "scored"} for o in outcomes]
        rows = [
            r
            for o in outcomes
            for r in o["scored"]
            .drop_columns([c for c in ("tests",) if c in o["scored"].column_names])
            .to_pylist()
        ]
        args.json.write_text(json.dumps({"results": body, "rows": rows}, indent=1, default=str))
        print(f"saved {args.json}")


if __name__ == "__main__":
    main()
