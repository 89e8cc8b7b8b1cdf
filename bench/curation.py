"""Incremental-curation benchmark: the cost of publishing one new label over a large version.

    python bench/curation.py [--rows 1000000] [--shard-rows 50000] [--base 20000]

Publishes a ``--rows`` SFT version (bench/storage.py's synthetic rows: ``--base`` distinct rows
generated, then repeated under fresh sample ids, since generating a million takes many minutes),
then a version in which ONE row changed (its ``batch``, as a new label would change a row's
``annotation``). Prints, for that second publish, with shard reuse off (every shard rewritten:
the cost before reuse) and on: wall time, bytes newly written (files in ``v2/`` that are not hard
links to ``v1/``), shards rewritten, and catalog rows added (``samples`` rows plus ``shard_refs``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.storage.versions import DatasetStore

_spec = importlib.util.spec_from_file_location("bench_storage", Path(__file__).with_name("storage.py"))
assert _spec is not None and _spec.loader is not None
_bench_storage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench_storage)
make_table = _bench_storage.make_table


def synthetic(rows: int, base: int) -> pa.Table:
    """``rows`` rows: ``base`` generated ones repeated, each copy under a fresh hex sample id."""
    seed = make_table(min(rows, base))
    copies = [seed] * (-(-rows // seed.num_rows))
    table = pa.concat_tables(copies).slice(0, rows).combine_chunks()
    ids = pa.array([hashlib.blake2b(str(i).encode(), digest_size=16).hexdigest() for i in range(rows)])
    return table.set_column(0, table.schema.field(0), ids)


def relabel(table: pa.Table, index: int) -> pa.Table:
    position = table.schema.get_field_index("batch")
    values = table.column("batch").to_pylist()
    values[index] = "expert-label"
    return table.set_column(position, table.schema.field(position), pa.array(values, pa.string()))


def measure(table: pa.Table, changed: pa.Table, shard_rows: int, reuse: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ptf-curation-") as home:
        store = DatasetStore(home)
        store.publish("sft", table, kind="sft", config_hash="c", shard_rows=shard_rows, reuse=reuse)
        start = time.perf_counter()
        result = store.publish(
            "sft", changed, kind="sft", config_hash="c", shard_rows=shard_rows, reuse=reuse
        )
        seconds = time.perf_counter() - start
        folder = Path(result.path)
        written = sum(p.stat().st_size for p in folder.iterdir() if p.stat().st_nlink == 1)
        samples = store.catalog.query("SELECT count(*) FROM samples WHERE version = 2")[0][0]
        refs = store.catalog.query("SELECT count(*) FROM shard_refs WHERE version = 2")[0][0]
        return {
            "seconds": seconds,
            "bytes": written,
            "rewritten": sum(1 for s in result.manifest.shards if s.reused_from is None),
            "shards": len(result.manifest.shards),
            "catalog": samples + refs,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shard-rows", type=int, default=50_000)
    parser.add_argument("--base", type=int, default=20_000, help="distinct rows generated")
    args = parser.parse_args()
    started = time.perf_counter()
    table = synthetic(args.rows, args.base)
    changed = relabel(table, args.rows // 2)
    print(
        f"{args.rows} rows ({table.nbytes / 1e6:.0f} MB in memory) made in {time.perf_counter() - started:.0f} s"
    )
    print(f"one changed row, shard_rows {args.shard_rows}, {os.cpu_count()} cores\n")
    old = measure(table, changed, args.shard_rows, reuse=False)
    new = measure(table, changed, args.shard_rows, reuse=True)
    print(f"| {'second publish':<24} | {'reuse off':>12} | {'reuse on':>12} | {'ratio':>8} |")
    print(f"|{'-' * 26}|{'-' * 14}|{'-' * 14}|{'-' * 10}|")
    rows = [
        ("wall time (s)", "seconds", "{:.2f}"),
        ("bytes written", "bytes", "{:,.0f}"),
        ("shards rewritten", "rewritten", "{:.0f}"),
        ("catalog rows added", "catalog", "{:,.0f}"),
    ]
    for label, key, fmt in rows:
        ratio = old[key] / new[key] if new[key] else float("inf")
        print(f"| {label:<24} | {fmt.format(old[key]):>12} | {fmt.format(new[key]):>12} | {ratio:>7.1f}x |")
    print(f"\n(shards in the version: {new['shards']:.0f})")


if __name__ == "__main__":
    main()
