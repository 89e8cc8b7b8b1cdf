"""The Ray dedup path against the in-process one, on the same box and corpus.

Starts a local two-node Ray cluster (a head and a worker, ``--cpus`` each; start-up timed apart),
then dedups the same corpus in-process (``DedupConfig.workers`` = both nodes' CPUs) and through
:class:`~ptfactory.filters.dedup.distributed.RayDedup`, ``--runs`` times each (medians), checks
that both give the same clusters, and prints the throughput ratio, per-shard costs and a
projection for ``--project`` candidates on N nodes built from those per-shard costs.

    .venv/bin/python bench/scale.py --rows 200000 --runs 3

With ``--code-rows N`` it also validates N HumanEval code rows (tests/scaling/raycluster.py's
``code_rows``) in-process (one Docker pool of ``2 * --pool`` containers) and through
:class:`~ptfactory.filters.execution.distributed.RaySandbox` (a pool of ``--pool`` per node),
``--runs`` times each, alternating, checks that both give the same statuses row for row, and
prints rows/s of each path. ``--rows 0`` skips the dedup part; ``--driver-split`` times the parts
of what the Ray path leaves on the driver (verification, union-find, exact pass and keeper rule).

    .venv/bin/python bench/scale.py --rows 0 --code-rows 2000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ptfactory.filters.dedup.core import DedupConfig, deduplicate
from ptfactory.filters.dedup.distributed import RayDedup
from tests.scaling.raycluster import start_cluster, text_corpus


def _projection(per_row: dict[str, float], rows: int, nodes: list[int], cores: int) -> list[dict[str, float]]:
    """Minutes for ``rows`` candidates: the fanned-out stages divide by the cluster's cores, the
    driver's verification and clustering does not (it is one process)."""
    parallel = per_row["hash"] + per_row["map"] + per_row["reduce"]
    out = []
    for n in nodes:
        fanned = rows * parallel / (n * cores)
        driver = rows * per_row["driver"]
        out.append(
            {
                "nodes": n,
                "fanned_min": fanned / 60,
                "driver_min": driver / 60,
                "total_min": (fanned + driver) / 60,
            }
        )
    return out


def _driver_split(texts: pa.Array, config: DedupConfig, runs: int) -> dict[str, object]:
    """What the Ray path's driver does, timed by part (median of ``runs``): ``deduplicate`` given
    the shuffle's pairs ready, and apart from it the verification of those pairs and union-find;
    the rest is the exact pass and the keeper rule."""
    from ptfactory.filters.dedup.core import _AMBIGUOUS, compute_signatures
    from ptfactory.filters.dedup.lsh import band_keys, candidate_pairs, estimated_jaccard, union_find

    hashed = compute_signatures(texts, config, keep_shingles=True)
    sig, shingles = hashed.signatures, hashed.shingles
    assert shingles is not None
    found: dict[str, np.ndarray] = {}

    def shuffle(usable: np.ndarray) -> np.ndarray:  # computed once, then handed over ready
        if "pairs" not in found:
            found["usable"], found["pairs"] = usable, candidate_pairs(band_keys(sig[usable], *config.bands))
        return found["pairs"]

    deduplicate(texts, config, hashed=hashed, candidates=shuffle)
    left, right = found["usable"][found["pairs"][:, 0]], found["usable"][found["pairs"][:, 1]]
    parts: dict[str, list[float]] = {"driver": [], "verification": [], "union_find": []}
    for _ in range(runs):
        began = time.perf_counter()
        deduplicate(texts, config, hashed=hashed, candidates=shuffle)
        parts["driver"].append(time.perf_counter() - began)
        began = time.perf_counter()
        score = estimated_jaccard(sig[left], sig[right])
        close = np.abs(score - config.threshold) < _AMBIGUOUS
        score[close] = shingles.jaccard(left[close], right[close])
        keep = score >= config.threshold
        parts["verification"].append(time.perf_counter() - began)
        began = time.perf_counter()
        union_find(len(sig), np.stack([left[keep], right[keep]], axis=1))
        parts["union_find"].append(time.perf_counter() - began)
    median = {k: statistics.median(v) for k, v in parts.items()}
    out: dict[str, object] = {k: round(v, 3) for k, v in median.items()}
    out["exact_pass_and_keeper_rule"] = round(
        median["driver"] - median["verification"] - median["union_find"], 3
    )
    out["candidate_pairs"] = len(left)
    return out


def _validation(count: int, runs: int, pool: int, chunk_jobs: int) -> dict[str, object]:
    """rows/s of execution validation in-process and on the cluster (already connected)."""
    from ptfactory.filters.execution.distributed import RaySandbox
    from ptfactory.filters.execution.limits import Limits
    from ptfactory.filters.execution.select import open_sandbox
    from ptfactory.filters.execution.validate import validate_samples
    from tests.scaling.raycluster import code_rows

    rows, limits = code_rows(count), Limits(timeout_s=10)
    local, remote = [], []
    for _ in range(runs):
        with open_sandbox(limits, 2 * pool, "docker") as sandbox:  # pool start-up counts, as in a step
            began = time.perf_counter()
            expected, _ = validate_samples(rows, sandbox)
            local.append(time.perf_counter() - began)
        with RaySandbox(limits, pool, "docker", chunk_jobs=chunk_jobs) as fanned:
            began = time.perf_counter()
            got, stats = validate_samples(rows, fanned)
            remote.append(time.perf_counter() - began)
        status = [(s or {}).get("execution", {}).get("status") for s in got.column("scores").to_pylist()]
        if status != [
            (s or {}).get("execution", {}).get("status") for s in expected.column("scores").to_pylist()
        ]:
            raise SystemExit("the Ray path's validation statuses differ from the in-process ones")
    return {
        "code_rows": count,
        "statuses": dict(stats.statuses),
        "pool": {"in_process": 2 * pool, "ray_per_node": pool, "chunk_jobs": chunk_jobs},
        "in_process_s": [round(x, 1) for x in local],
        "ray_s": [round(x, 1) for x in remote],
        "in_process_rows_per_s": round(count / statistics.median(local), 1),
        "ray_rows_per_s": round(count / statistics.median(remote), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=1, help="CPUs of each of the two nodes")
    parser.add_argument("--shard-rows", type=int, default=20_000)
    parser.add_argument("--project", type=int, default=100_000_000)
    parser.add_argument("--project-cores", type=int, default=16, help="cores per node in the projection")
    parser.add_argument(
        "--code-rows", type=int, default=0, help="also time execution validation of this many rows"
    )
    parser.add_argument("--driver-split", action="store_true", help="also time the driver's parts of dedup")
    parser.add_argument("--pool", type=int, default=2, help="sandbox containers per node (validation)")
    parser.add_argument("--chunk-jobs", type=int, default=50, help="jobs per Ray validation task")
    args = parser.parse_args()

    started = time.perf_counter()
    result: dict[str, object] = {}
    with start_cluster(head_cpus=args.cpus, worker_cpus=args.cpus) as cluster:
        result["cluster_startup_s"] = round(time.perf_counter() - started, 1)
        if args.rows:
            result["dedup"] = _dedup(args, cluster.node_ids())
        if args.code_rows:
            result["validation"] = _validation(args.code_rows, args.runs, args.pool, args.chunk_jobs)
    print(json.dumps(result, indent=2))


def _dedup(args: argparse.Namespace, nodes: dict[str, str]) -> dict[str, object]:
    texts = pa.array(text_corpus(args.rows), pa.string())
    config = DedupConfig(workers=2 * args.cpus)
    engine = RayDedup(shard_rows=args.shard_rows)
    engine(texts.slice(0, min(args.rows, 2 * args.shard_rows)), config)  # warm the worker processes
    local, remote, reports = [], [], []
    expected = None
    for _ in range(args.runs):
        began = time.perf_counter()
        expected = deduplicate(texts, config)
        local.append(time.perf_counter() - began)
        began = time.perf_counter()
        got = engine(texts, config)
        remote.append(time.perf_counter() - began)
        reports.append(engine.report)
        if not (np.array_equal(got.cluster, expected.cluster) and got.reason == expected.reason):
            raise SystemExit("the Ray path's clusters differ from the in-process ones")
    assert expected is not None
    in_process, on_ray = statistics.median(local), statistics.median(remote)
    last = reports[len(reports) // 2]
    shard = args.shard_rows
    per_row = {
        "hash": statistics.median(s for r in reports for s in r.hash_seconds) / shard,
        "map": statistics.median(s for r in reports for s in r.map_seconds) / shard,
        "reduce": statistics.median(s for r in reports for s in r.reduce_seconds)
        / (args.rows / max(1, len(last.reduce_seconds))),
        "driver": statistics.median(r.stage_seconds["cluster"] for r in reports) / args.rows,
    }
    return {
        "rows": args.rows,
        "runs": args.runs,
        "in_process_s": [round(x, 2) for x in local],
        "ray_s": [round(x, 2) for x in remote],
        "in_process_rows_per_s": round(args.rows / in_process),
        "ray_rows_per_s": round(args.rows / on_ray),
        "throughput_ratio": round(in_process / on_ray, 3),
        "stage_s_median_run": {k: round(v, 2) for k, v in last.stage_seconds.items()},
        "per_shard_s": {
            "hash": round(per_row["hash"] * shard, 3),
            "map": round(per_row["map"] * shard, 3),
            "reduce_per_partition": round(statistics.median(last.reduce_seconds), 3),
            "shard_rows": shard,
            "partitions": len(last.reduce_seconds),
        },
        "per_row_us": {k: round(v * 1e6, 2) for k, v in per_row.items()},
        "hash_tasks_by_node": {role: last.hash_nodes.count(node) for role, node in nodes.items()},
        "shuffle_partitions_crossing_nodes": last.crossed_nodes,
        "stats": expected.stats,
        "projection": _projection(per_row, args.project, [1, 4, 16, 64], args.project_cores),
        **({"driver_split_s": _driver_split(texts, config, args.runs)} if args.driver_split else {}),
    }


if __name__ == "__main__":
    main()
