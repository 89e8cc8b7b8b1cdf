"""The Ray dedup path against the in-process one, on the same box and corpus.

Starts a local two-node Ray cluster (a head and a worker, ``--cpus`` each; start-up timed apart),
then dedups the same corpus in-process (``DedupConfig.workers`` = both nodes' CPUs) and through
:class:`~ptfactory.filters.dedup.distributed.RayDedup`, ``--runs`` times each (medians), checks
that both give the same clusters, and prints the throughput ratio, per-shard costs and a
projection for ``--project`` candidates on N nodes built from those per-shard costs.

    .venv/bin/python bench/scale.py --rows 200000 --runs 3
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
    args = parser.parse_args()

    texts = pa.array(text_corpus(args.rows), pa.string())
    config = DedupConfig(workers=2 * args.cpus)
    started = time.perf_counter()
    with start_cluster(head_cpus=args.cpus, worker_cpus=args.cpus) as cluster:
        startup = time.perf_counter() - started
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
        nodes = cluster.node_ids()
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
    result = {
        "rows": args.rows,
        "runs": args.runs,
        "cluster_startup_s": round(startup, 1),
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
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
