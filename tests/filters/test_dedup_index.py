"""The persistent index of published samples: lookups, idempotent adds, concurrent readers, rebuild."""

import multiprocessing
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptfactory.errors import ConfigError
from ptfactory.filters.dedup.core import DedupConfig, compute_signatures
from ptfactory.filters.dedup.index import PublishedIndex
from tests.filters.corpus import build

CONFIG = DedupConfig()


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return build(families=20, unrelated=40, seed=3).texts


def test_published_samples_are_found_and_adds_are_idempotent(tmp_path: Path, texts: list[str]) -> None:
    index = PublishedIndex(tmp_path / "index.duckdb", CONFIG)
    sig = compute_signatures(texts, CONFIG).signatures
    ids = [f"s{i}" for i in range(len(texts))]
    assert index.add(ids[:30], sig[:30], "sft", 1) == 30
    assert index.add(ids[:30], sig[:30], "sft", 2) == 0  # already indexed
    # what a new version must still hash: only the ids the index does not hold, in their order
    assert index.missing([ids[31], ids[0], ids[30]]) == [ids[31], ids[30]]
    assert PublishedIndex(tmp_path / "new.duckdb", CONFIG).missing(ids[:2]) == ids[:2]
    assert index.count() == 30
    found = index.query(sig)
    for i in range(30):  # each indexed text finds itself (or, on a tie at 1.0, an identical text)
        match = found[i]
        assert match is not None
        assert match[0] == f"s{i}" or match[1] == 1.0
    family_of_first = [i for i in range(30, len(texts)) if found[i] is not None]
    assert all(found[i][1] >= 0.8 for i in family_of_first)  # type: ignore[index]
    index.add(
        ["late"],
        compute_signatures(["a text published from batch b9 only"], CONFIG).signatures,
        "sft",
        3,
        ["b9"],
    )
    probe = compute_signatures(["a text published from batch b9 only"], CONFIG).signatures
    assert index.query(probe)[0] == ("late", 1.0)
    assert index.query(probe, exclude_batch="b9")[0] is None  # a rerun of b9 does not find itself


def test_settings_mismatch_says_to_rebuild(tmp_path: Path, texts: list[str]) -> None:
    sig = compute_signatures(texts[:3], CONFIG).signatures
    PublishedIndex(tmp_path / "index.duckdb", CONFIG).add(["a", "b", "c"], sig, "sft", 1)
    other = PublishedIndex(tmp_path / "index.duckdb", DedupConfig(threshold=0.7))
    with pytest.raises(ConfigError, match=r"rebuild it with `ptf datasets reindex`"):
        other.query(compute_signatures(texts[:3], other.config).signatures)


def test_word_hashes_are_the_specified_xxh3_and_signatures_do_not_drift() -> None:
    """The hash is defined by its specification (XXH3-64, the same as the xxhash package's), and a
    fixed text's shingle hashes and signature are pinned: a change of library or of our combining
    scheme fails here, which is when SHINGLE_HASH must change (and force a reindex)."""
    import xxhash

    from ptfactory.filters.dedup.minhash import SHINGLE_HASH, shingle_hashes, signatures, word_hashes, words

    flat, lengths = words(["The quick brown fox jumps over the lazy dog near the river bank today"])
    assert word_hashes(flat, 1).tolist() == [xxhash.xxh3_64_intdigest(w.encode(), 1) for w in flat.to_list()]
    docs, hashes, whole = shingle_hashes(flat, lengths, 5, 1)
    assert hashes[:3].tolist() == [2855452591990961229, 18062224566075883431, 275920212462944498]
    assert int(whole[0]) == 1642151385264674436
    assert signatures(docs, hashes, 1, 16, 1)[0, :4].tolist() == [
        2855551218,
        2624694712,
        3935761485,
        1001675442,
    ]
    assert SHINGLE_HASH == "xxh3_64-words+fnv-ngrams+splitmix/1"


@pytest.mark.parametrize("recorded", [None, "polars-series-hash/0"])
def test_an_index_built_with_another_hash_is_refused(
    tmp_path: Path, texts: list[str], recorded: str | None
) -> None:
    from ptfactory.storage.duck import connect

    path = tmp_path / "index.duckdb"
    sig = compute_signatures(texts[:3], CONFIG).signatures
    PublishedIndex(path, CONFIG).add(["a", "b", "c"], sig, "sft", 1)
    with connect(path) as con:  # what an index of an older ptfactory, or another hash, holds
        con.execute("DELETE FROM meta WHERE key = 'hash'")
        if recorded:
            con.execute("INSERT INTO meta VALUES ('hash', ?)", [recorded])
    index = PublishedIndex(path, CONFIG)
    with pytest.raises(
        ConfigError, match=r"built with shingle hash .*; rebuild it with `ptf datasets reindex`"
    ):
        index.query(sig)
    with pytest.raises(ConfigError, match="ptf datasets reindex"):
        index.add(["d"], sig[:1], "sft", 2)
    index.clear()  # what reindex does first; then the index takes the current hash again
    assert index.add(["a"], sig[:1], "sft", 1) == 1
    assert index.query(sig[:1])[0] == ("a", 1.0)


def _read_many(path: str, rounds: int, queue: "multiprocessing.Queue[int]") -> None:
    texts = build(families=20, unrelated=40, seed=3).texts
    index = PublishedIndex(Path(path), CONFIG)
    sig = compute_signatures(texts[:20], CONFIG).signatures
    hits = 0
    for _ in range(rounds):
        hits += sum(1 for m in index.query(sig) if m is not None)
    queue.put(hits)


def test_concurrent_readers_while_a_writer_adds(tmp_path: Path, texts: list[str]) -> None:
    path = tmp_path / "index.duckdb"
    index = PublishedIndex(path, CONFIG)
    sig = compute_signatures(texts, CONFIG).signatures
    index.add([f"s{i}" for i in range(20)], sig[:20], "sft", 1)
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[int] = context.Queue()
    readers = [context.Process(target=_read_many, args=(str(path), 10, queue)) for _ in range(2)]
    for reader in readers:
        reader.start()
    for start in range(20, len(texts), 5):  # the writer keeps adding while they read
        end = min(start + 5, len(texts))
        index.add([f"s{i}" for i in range(start, end)], sig[start:end], "sft", 2)
    for reader in readers:
        reader.join(120)
        assert reader.exitcode == 0
    assert [queue.get(timeout=5) for _ in readers] == [200, 200]


def test_cli_dedup_writes_the_three_columns(ptf, tmp_path: Path, texts: list[str]) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": np.arange(len(texts)), "body": texts}), source)
    result = ptf(
        "dedup",
        str(source),
        "--text-column",
        "body",
        "--threshold",
        "0.8",
        "--out",
        str(tmp_path / "out.parquet"),
    )
    assert result.returncode == 0, result.stderr
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.column_names == ["id", "body", "dedup_cluster", "dedup_representative", "dedup_jaccard"]
    assert out.column("id").to_pylist() == list(range(len(texts)))
    clusters = out.column("dedup_cluster").to_pylist()
    reps = out.column("dedup_representative").to_pylist()
    assert all(reps[c] for c in clusters)  # every cluster points at a kept row
    assert sum(reps) < len(texts)  # the corpus has duplicates
    assert all(j == 1.0 for j, r in zip(out.column("dedup_jaccard").to_pylist(), reps, strict=True) if r)
    missing = ptf(
        "dedup",
        str(source),
        "--text-column",
        "text",
        "--threshold",
        "0.8",
        "--out",
        str(tmp_path / "x.parquet"),
    )
    assert missing.returncode == 2
    assert "has no column 'text'; columns: id, body" in missing.stderr
