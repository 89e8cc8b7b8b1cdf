"""Storage benchmark: publish and pull+verify against bare pyarrow / copy+sha256 baselines.

    python bench/storage.py [--rows 200000] [--repeats 3]

Prints, for one run on this machine, the median of ``--repeats`` timings of:
- publish (validate, sort, shard, sha256, manifest, card, fsync, rename, catalog) vs bare
  ``pyarrow.parquet.write_table`` of the same shards (same rows per shard, codec and level),
  written by a thread pool as wide as publish's (one thread per core: both get every core);
- publish with the write–audit–publish checks that need only the table (shards read back and
  verified, schema, unique ids), against the same baseline;
- pull + verify (copy every shard while hashing, compare with the manifest) vs ``shutil.copy``
  then ``hashlib.sha256`` of the same files, by a thread pool as wide as pull's;
and the raw sequential disk write speed (dd, fsync'd) for context. Goal: ratios >= 0.9.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.storage.audit import Audit, schema_valid, unique_ids
from ptfactory.storage.pull import pull
from ptfactory.storage.schema import from_records, sample_id
from ptfactory.storage.shards import PARQUET_OPTIONS
from ptfactory.storage.versions import DatasetStore


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    return ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(size)]


def make_table(rows: int) -> pa.Table:
    """Text with a natural-ish word distribution, so zstd has realistic work (not a repeated string)."""
    rng = random.Random(0)
    vocab = _vocabulary(20_000, rng)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf, like real text
    records = []
    for i in range(rows):
        words = rng.choices(vocab, weights=weights, k=rng.randint(30, 250))
        prompt = f"Task {i}: " + " ".join(words[:25])
        answer = " ".join(words[25:]) + f" ({i})"
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
        records.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": f"b{i % 4}",
                "kind": "sft",
                "messages": messages,
                "provenance": {
                    "method": "bench",
                    "engine": "transformers",
                    "model": "SmolLM2-135M-Instruct",
                    "sampling_params": '{"temperature":0.7}',
                    "seed_task_id": f"s{i % 1000}",
                },
                "decisions": [
                    {"stage": "seed", "verdict": "keep", "reason": "with_reference", "detail": None}
                ],
            }
        )
    return from_records(records)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def dd_write_mb_s(directory: Path, megabytes: int = 256) -> float:
    target = directory / "dd.bin"
    out = subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={megabytes}", "conv=fsync"],
        capture_output=True,
        text=True,
        check=True,
    )
    target.unlink()
    # dd prints e.g. "268435456 bytes (268 MB, 256 MiB) copied, 0.5 s, 537 MB/s"
    seconds = float(out.stderr.strip().splitlines()[-1].split(",")[-2].split()[0])
    return megabytes * 1.048576 / seconds


def write_shards_bare(table: pa.Table, directory: Path, shard_rows: int, threads: int) -> None:
    """The baseline: the same shards as publish writes, each a plain ``pq.write_table``."""
    starts = range(0, table.num_rows, shard_rows)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(
            pool.map(
                lambda s: pq.write_table(
                    table.slice(s, shard_rows),
                    directory / f"part-{s // shard_rows:05d}.parquet",
                    **PARQUET_OPTIONS,
                ),
                starts,
            )
        )


def copy_then_hash(shards: list[Path], dest: Path, threads: int) -> None:
    """The baseline for pull+verify: copy each shard, then sha256 the copy, shards in parallel."""
    dest.mkdir()

    def one(shard: Path) -> str:
        shutil.copy(shard, dest / shard.name)
        digest = hashlib.sha256()
        with open(dest / shard.name, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(one, shards))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shard-rows", type=int, default=50_000)
    args = parser.parse_args()

    table = make_table(args.rows)
    # publish shards and pull copies with one thread per core (storage.shards, storage.pull)
    threads = max(1, min(os.cpu_count() or 1, -(-args.rows // args.shard_rows)))
    print(
        f"table: {table.num_rows} rows, {table.nbytes / 1e6:.0f} MB in memory; {threads} threads", flush=True
    )
    audit = Audit([schema_valid, unique_ids])
    with tempfile.TemporaryDirectory(prefix="ptf-bench-", dir=os.environ.get("BENCH_DIR")) as tmp:
        root = Path(tmp)
        bare, publish, audited, copy_hash, pull_verify = [], [], [], [], []
        for rep in range(args.repeats):
            bare_dir = root / f"bare{rep}"
            bare_dir.mkdir()
            bare.append(timed(lambda d=bare_dir: write_shards_bare(table, d, args.shard_rows, threads)))
            store = DatasetStore(str(root / f"home{rep}"))
            publish.append(
                timed(
                    lambda s=store: s.publish(
                        "bench", table, kind="sft", config_hash="c", shard_rows=args.shard_rows
                    )
                )
            )
            checked = DatasetStore(str(root / f"audited{rep}"))
            audited.append(
                timed(
                    lambda s=checked: s.publish(
                        "bench", table, kind="sft", config_hash="c", shard_rows=args.shard_rows, audit=audit
                    )
                )
            )
            version_dir = Path(store.version_dir("bench", 1))
            shards = sorted(version_dir.glob("part-*.parquet"))
            copy_hash.append(timed(lambda d=root / f"copy{rep}", s=shards: copy_then_hash(s, d, threads)))
            pull_verify.append(timed(lambda s=store, d=root / f"pull{rep}": pull(s, "bench@v1", d)))
            print(
                f"  repeat {rep + 1}: bare {bare[-1]:.2f}s publish {publish[-1]:.2f}s audited {audited[-1]:.2f}s "
                f"copy+sha {copy_hash[-1]:.2f}s pull {pull_verify[-1]:.2f}s",
                flush=True,
            )
        size_mb = sum(p.stat().st_size for p in shards) / 1e6
        disk = dd_write_mb_s(root)

    def row(name: str, seconds: list[float], baseline: list[float]) -> str:
        ours, base = statistics.median(seconds), statistics.median(baseline)
        return f"| {name} | {size_mb / ours:8.1f} MB/s | {size_mb / base:8.1f} MB/s | {base / ours:5.2f}x |"

    print()
    print(
        f"rows={args.rows} shard_rows={args.shard_rows} parquet={size_mb:.1f} MB zstd(level "
        f"{PARQUET_OPTIONS['compression_level']}), {threads} threads on both sides, median of {args.repeats}"
    )
    print("| operation | ptfactory | baseline | ratio (goal >= 0.9) |")
    print("|---|---|---|---|")
    print(row("publish vs pq.write_table (same shards, same threads)", publish, bare))
    print(row("publish + audit vs pq.write_table", audited, bare))
    print(row("pull+verify vs copy+sha256 (same threads)", pull_verify, copy_hash))
    print(
        f"raw disk write (dd, fsync): {disk:.0f} MB/s; zstd writing runs at "
        f"{size_mb / statistics.median(bare) / disk:.2f}x of it"
    )


if __name__ == "__main__":
    main()
