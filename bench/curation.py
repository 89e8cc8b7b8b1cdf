"""Incremental-curation benchmark: the cost of publishing one new label over a large version.

    python bench/curation.py [--rows 1000000] [--shard-rows 50000] [--repeats 3] [--audit full|none]

Publishes a ``--rows`` SFT version, train and validation (one row in sixteen held out by its id), with
the factory's write–audit–publish checks (``--audit full``: schema, unique ids, shards verified,
no_split_leak by MinHash LSH, chat template rendered by a real tokenizer, judged batches). Rows are
bench/storage.py's synthetic ones: ``--base`` generated, then repeated with every word of a copy
rewritten (``w`` -> ``c<copy>w``), so no two rows are near duplicates and the leak check has real
work. Then, ``--repeats`` times each, a version in which ONE row changed (its ``batch``, as a new
expert label changes a row), published three ways on the same dataset:

- before: the whole table, every shard rewritten (``reuse=False``: the cost before incremental
  curation) and the audit over the whole version;
- full + reuse: the whole table, unchanged buckets reused (hard links), the audit over the whole
  version (``DatasetStore.publish``, what the dataset asset did until the delta path);
- delta: only the changed row over the latest version (``DatasetStore.publish_delta``: the touched
  bucket read, merged, written; the audit on the change, relying on the parent's passed checks).

For each: wall time of the publish (audit included), bytes written (files new in ``vN/``, i.e. not
hard links to an earlier version, plus the leak-key files the audit kept), and catalog rows added
(``samples`` rows plus ``shard_refs``). Median of the repeats. The first delta after a full publish
also builds the band keys of the shards it needs (one MinHash pass over them, as a full audit does);
it is printed apart and not in the median. Also apart: what the dataset asset does before a delta
publish, finding the changed row among all rows (``storage.changes.changes_since``: every row hashed,
sums per id range compared with the manifest's, the differing ranges read).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.storage.audit import Audit
from ptfactory.storage.changes import changes_since
from ptfactory.storage.shards import read_shard
from ptfactory.storage.versions import DatasetStore

_spec = importlib.util.spec_from_file_location("bench_storage", Path(__file__).with_name("storage.py"))
assert _spec is not None and _spec.loader is not None
_bench_storage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench_storage)
make_table = _bench_storage.make_table


def _reworded(messages: pa.ChunkedArray, copy: int) -> pa.Array:
    """The same conversations with every word prefixed by ``c<copy>``: no shingle in common."""
    array = messages.combine_chunks()
    items = array.values
    content = pc.replace_substring(items.field("content"), " ", f" c{copy}")
    content = pc.binary_join_element_wise(f"c{copy}", content, "")
    fields = [content if f.name == "content" else items.field(f.name) for f in items.type]
    rebuilt = pa.StructArray.from_arrays(fields, fields=list(items.type))
    return pa.ListArray.from_arrays(array.offsets, rebuilt, type=array.type)


def synthetic(rows: int, base: int) -> pa.Table:
    """``rows`` rows: ``base`` generated ones, then reworded copies, each under a fresh hex id."""
    seed = make_table(min(rows, base))
    position = seed.schema.get_field_index("messages")
    copies = []
    for copy in range(-(-rows // seed.num_rows)):
        part = (
            seed
            if copy == 0
            else seed.set_column(
                position, seed.schema.field(position), _reworded(seed.column("messages"), copy)
            )
        )
        copies.append(part)
    table = pa.concat_tables(copies).slice(0, rows).combine_chunks()
    ids = pa.array([hashlib.blake2b(str(i).encode(), digest_size=16).hexdigest() for i in range(rows)])
    return table.set_column(0, table.schema.field(0), ids)


def split(table: pa.Table) -> dict[str, pa.Table]:
    """One row in sixteen held out, by the last hex digit of its id (so a changed row keeps its
    side; buckets are ranges of the leading digits, so both sides spread over every bucket)."""
    ids = table.column("sample_id")
    held = pc.equal(pc.utf8_slice_codeunits(ids, 31, 32), "0")
    return {"train": table.filter(pc.invert(held)), "validation": table.filter(held)}


def relabel(splits: dict[str, pa.Table], index: int, label: str) -> tuple[dict[str, pa.Table], pa.Table]:
    """The splits with train row ``index`` given a new ``batch``; and that row alone."""
    train = splits["train"]
    position = train.schema.get_field_index("batch")
    values = train.column("batch").to_pylist()
    values[index] = label
    changed = train.set_column(position, train.schema.field(position), pa.array(values, pa.string()))
    return {**splits, "train": changed}, changed.slice(index, 1)


def bench_audit(home: Path, scratch: Path, kind: str) -> tuple[Audit | None, Path | None]:
    """The factory's publish audit (a tiny chat model's tokenizer, default dedup settings)."""
    if kind == "none":
        return None, None
    from ptfactory.assets.audit import leak_key_cache, publish_audit
    from ptfactory.assets.resources import SettingsResource
    from ptfactory.assets.resources.engines import chat_tokenizer
    from tests.models import build_tiny_model

    model = build_tiny_model(scratch / "tiny-model")
    config = scratch / "factory.yaml"
    config.write_text(f"engines:\n  generator: {{model: {model}}}\n")
    settings = SettingsResource(home=str(home), config_path=str(config))
    return publish_audit(settings, lambda: chat_tokenizer(settings.config)), leak_key_cache(settings).folder


def _files(folder: Path | None) -> dict[Path, int]:
    if folder is None or not folder.exists():
        return {}
    return {p: p.stat().st_size for p in folder.iterdir() if p.is_file()}


def measure(store: DatasetStore, publish: Callable[[], Any], keys: Path | None) -> dict[str, float]:
    before = _files(keys)
    start = time.perf_counter()
    result = publish()
    seconds = time.perf_counter() - start
    assert result.created, "nothing was published"
    manifest = result.manifest
    folder = Path(result.path)
    written = sum(p.stat().st_size for p in folder.iterdir() if p.stat().st_nlink == 1)
    written += sum(size for p, size in _files(keys).items() if p not in before)
    query = "SELECT count(*) FROM {} WHERE name = 'sft' AND version = ?"
    catalog = sum(
        store.catalog.query(query.format(t), [manifest.version])[0][0] for t in ("samples", "shard_refs")
    )
    return {
        "seconds": seconds,
        "bytes": written,
        "catalog": catalog,
        "rewritten": sum(1 for s in manifest.shards if s.reused_from is None),
        "shards": len(manifest.shards),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shard-rows", type=int, default=50_000)
    parser.add_argument("--base", type=int, default=20_000, help="distinct rows generated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--audit", choices=["full", "none"], default="full")
    args = parser.parse_args()
    started = time.perf_counter()
    splits = split(synthetic(args.rows, args.base))
    size = sum(t.nbytes for t in splits.values()) / 1e6
    print(
        f"{args.rows} rows ({size:.0f} MB in memory) made in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    print(
        f"one changed row, shard_rows {args.shard_rows}, audit {args.audit}, {os.cpu_count()} cores\n",
        flush=True,
    )
    common: dict[str, Any] = {
        "kind": "sft",
        "config_hash": "c",
        "shard_rows": args.shard_rows,
        "batches": ["b"],
    }
    with tempfile.TemporaryDirectory(prefix="ptf-curation-", dir=os.environ.get("BENCH_DIR")) as tmp:
        home = Path(tmp) / "home"
        audit, keys = bench_audit(home, Path(tmp), args.audit)
        store = DatasetStore(str(home))
        started = time.perf_counter()
        store.publish("sft", splits, audit=audit, **common)
        print(f"v1 published (audit {args.audit}) in {time.perf_counter() - started:.0f} s", flush=True)
        rng = np.random.default_rng(0)
        picks = iter(rng.choice(splits["train"].num_rows, size=4 * args.repeats + 1, replace=False))
        results: dict[str, list[dict[str, float]]] = {"before": [], "reuse": [], "delta": []}
        store_checks: list[dict[str, str]] = []

        state = {"splits": splits}  # the latest version's rows: each label lands on top of the last

        def label() -> pa.Table:
            state["splits"], row = relabel(state["splits"], int(next(picks)), f"label-{time.monotonic_ns()}")
            return row

        def full(reuse: bool) -> Callable[[], Any]:
            label()
            changed = state["splits"]
            return lambda: store.publish("sft", changed, audit=audit, reuse=reuse, **common)

        def delta() -> Callable[[], Any]:
            row, base = label(), store.versions("sft")[-1]
            return lambda: store.publish_delta("sft", {"train": row}, base=base, audit=audit, **common)

        def find() -> dict[str, float]:
            """What the dataset asset does before a delta publish: find the change in every row."""
            parent = store.resolve("sft@latest")
            directory = store.version_dir("sft", parent.version)
            changed, _ = relabel(state["splits"], int(next(picks)), f"label-{time.monotonic_ns()}")
            every = pa.concat_tables(list(changed.values()))
            start = time.perf_counter()
            found = changes_since(parent, every, lambda shard: read_shard(store.store, directory, shard))
            assert found is not None and found.upserts.num_rows == 1
            return {"seconds": time.perf_counter() - start, "read_rows": found.read_rows}

        first = measure(store, delta(), keys)
        print(f"  first delta after a full publish (builds leak keys): {first['seconds']:.2f} s", flush=True)
        # the modes take turns, so a burst of load on the machine falls on all of them alike
        for round_ in range(args.repeats):
            for mode, make in (
                ("before", lambda: full(False)),
                ("reuse", lambda: full(True)),
                ("delta", delta),
            ):
                results[mode].append(measure(store, make(), keys))
            print(
                f"  round {round_ + 1}: "
                + ", ".join(f"{mode} {runs[-1]['seconds']:.2f} s" for mode, runs in results.items()),
                flush=True,
            )
        finding = [find() for _ in range(args.repeats)]
        latest = store.resolve("sft@latest")
        store_checks.append(
            {name: "passed" if body["passed"] else "FAILED" for name, body in latest.checks.items()}
            | {"checked rows": str({k: v["detail"].get("checked_rows") for k, v in latest.checks.items()})}
        )

    med = {
        mode: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for mode, runs in results.items()
    }
    print(f"\nmedian of {args.repeats}; shards in the version: {med['delta']['shards']:.0f}")
    print(f"| one new label, {args.rows:,} rows | before | full + reuse | delta | before / delta |")
    print("|---|---|---|---|---|")
    rows = [
        ("publish wall time (s)", "seconds", "{:.2f}"),
        ("bytes written", "bytes", "{:,.0f}"),
        ("shards rewritten", "rewritten", "{:.0f}"),
        ("catalog rows added", "catalog", "{:,.0f}"),
    ]
    for label, key, fmt in rows:
        b, r, d = (med[m][key] for m in ("before", "reuse", "delta"))
        ratio = f"{b / d:.1f}x" if d else "inf"
        print(f"| {label} | {fmt.format(b)} | {fmt.format(r)} | {fmt.format(d)} | {ratio} |")
    print(
        f"\nfirst delta after a full publish: {first['seconds']:.2f} s, {first['bytes']:,.0f} bytes "
        "(band keys of the shards across from the change computed once)"
    )
    print(
        f"finding the change in all {args.rows:,} rows first (row hashes, sums per id range, the differing "
        f"ranges read: {statistics.median(f['read_rows'] for f in finding):,.0f} rows), as the dataset asset "
        f"does: {statistics.median(f['seconds'] for f in finding):.2f} s"
    )
    checks = store_checks[-1]
    print("the last delta's audit: " + "; ".join(f"{k}: {v}" for k, v in checks.items()))


if __name__ == "__main__":
    main()
