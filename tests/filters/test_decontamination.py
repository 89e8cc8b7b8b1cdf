"""Decontamination: rows quoting a benchmark item are dropped naming the item; the shipped index,
users' files, the cache and its refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from ptfactory.errors import ConfigError
from ptfactory.filters.decontamination import (
    BenchmarkFile,
    DecontaminationConfig,
    NgramIndex,
    build_count,
    check_texts,
    decontaminate_samples,
    load_index,
)
from ptfactory.filters.decontamination.cache import SHIPPED
from ptfactory.filters.decontamination.normalize import _unicode_words, normalized_words
from ptfactory.filters.decontamination.sources import builtin_items
from ptfactory.storage.schema import add_decision, from_records, sample_id


@pytest.fixture(scope="module")
def shipped() -> NgramIndex:
    return NgramIndex.load(SHIPPED)


def _row(question: str, answer: str, kind: str = "sft", tests: str | None = None) -> dict[str, Any]:
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return {
        "sample_id": sample_id(kind, messages, tests=tests),
        "batch": "b1",
        "kind": kind,
        "messages": messages,
        "tests": tests,
        "entry_point": "f" if kind == "code" else None,
    }


def test_shipped_index_covers_every_builtin_without_text(shipped: NgramIndex) -> None:
    counts = shipped.counts
    assert counts["humaneval"] == 164 and counts["gsm8k-test"] == 1319 and counts["gpqa-diamond"] == 198
    assert all(count > 0 for count in counts.values())
    assert shipped.empty_benchmarks() == []
    assert len(shipped.content_hash) == 64 and shipped.summary()["index_hash"] == shipped.content_hash
    gpqa_question = builtin_items("gpqa-diamond")[0].texts[0]
    assert gpqa_question[:60].encode() not in SHIPPED.read_bytes()  # hashes only, no plain text


def test_contaminated_row_dropped_naming_the_item_with_one_sentence_changed(shipped: NgramIndex) -> None:
    item = builtin_items("gsm8k-test")[12]
    sentences = item.texts[0].split(". ")
    reworded = ". ".join([sentences[0], "Her cousin visits on Sundays", *sentences[2:]])
    clean = "Write a limerick about a heron who waits all day for a fish that never comes to the pond."
    table = from_records([_row(reworded, "Let me work it out."), _row(clean, "There once was a heron...")])
    upstream = add_decision(table, "dedup", ["keep", "keep"], ["unique", "unique"])
    out, stats = decontaminate_samples(upstream, shipped)
    decisions = out.column("decisions").to_pylist()
    last = decisions[0][-1]
    assert (last["stage"], last["verdict"], last["reason"]) == ("decontaminate", "drop", "contaminated")
    detail = json.loads(last["detail"])
    assert detail["benchmark"] == "gsm8k-test" and detail["item"] == "gsm8k-test/12"
    assert len(detail["ngram"].split()) == 13 and detail["ngram"] in " ".join(
        normalized_words([reworded])[0].to_list()
    )
    assert decisions[1][-1]["verdict"] == "keep" and decisions[1][-1]["reason"] == "clean"
    assert stats.contaminated == 1 and stats.by_benchmark == {"gsm8k-test": 1}


def test_tests_field_and_reformatting_are_checked(shipped: NgramIndex) -> None:
    humaneval = builtin_items("humaneval")[7]
    squashed = " ".join(humaneval.texts[2].replace("(", " ( ").split())  # whitespace and layout reflowed
    hits = check_texts([squashed, "def f(x):\n    return x + 1\n"], shipped)
    assert hits[0] is not None and hits[0].item == "HumanEval/7"
    assert hits[1] is None
    table = from_records([_row("Write f.", "def f(): pass", kind="code", tests=humaneval.texts[2])])
    out, _ = decontaminate_samples(table, shipped)
    assert json.loads(out.column("decisions").to_pylist()[0][-1]["detail"])["item"] == "HumanEval/7"


def test_rows_dropped_upstream_are_not_checked(shipped: NgramIndex) -> None:
    quote = builtin_items("gsm8k-test")[3].texts[0]
    table = add_decision(from_records([_row(quote, "x")]), "dedup", ["drop"], ["near_duplicate"])
    out, stats = decontaminate_samples(table, shipped)
    assert stats.checked == 0 and [d["stage"] for d in out.column("decisions").to_pylist()[0]] == ["dedup"]


def test_user_file_short_items_match_on_their_whole_text(tmp_path: Path) -> None:
    bench = tmp_path / "quiz.jsonl"
    items = [
        {"id": "q1", "question": "Name the capital city of Australia."},
        {"id": "q2", "question": "Who wrote Middlemarch?"},
    ]
    bench.write_text("".join(json.dumps(i) + "\n" for i in items))
    config = DecontaminationConfig(
        builtins=[], benchmarks=[BenchmarkFile(path=bench, fields=["question"], name="quiz")]
    )
    index = load_index(config, tmp_path / "state")
    hits = check_texts(
        [
            "Quick one: name the capital city of Australia!",
            "Who wrote Middlemarch and when?",
            "Who wrote Hamlet?",
        ],
        index,
    )
    assert [h.item if h else None for h in hits] == ["quiz/q1", "quiz/q2", None]


def test_second_load_reads_the_cache_and_an_edit_rebuilds(tmp_path: Path) -> None:
    bench = tmp_path / "b.jsonl"
    bench.write_text(
        json.dumps(
            {"prompt": "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"}
        )
        + "\n"
    )
    config = DecontaminationConfig(
        builtins=["aime-2025"], benchmarks=[BenchmarkFile(path=bench, fields=["prompt"], name="mine")]
    )
    before = build_count()
    first = load_index(config, tmp_path / "state")
    second = load_index(config, tmp_path / "state")
    assert build_count() == before + 1  # the second came from the cache
    assert first.content_hash == second.content_hash and second.counts == {"aime-2025": 30, "mine": 1}
    bench.write_text(bench.read_text() + json.dumps({"prompt": "another item"}) + "\n")
    assert load_index(config, tmp_path / "state").counts["mine"] == 2 and build_count() == before + 2


def test_a_benchmark_that_loads_nothing_is_reported(tmp_path: Path) -> None:
    bench = tmp_path / "empty.jsonl"
    bench.write_text(json.dumps({"other": "field"}) + "\n")
    config = DecontaminationConfig(
        builtins=[], benchmarks=[BenchmarkFile(path=bench, fields=["question"], name="empty")]
    )
    assert load_index(config, tmp_path / "s").empty_benchmarks() == ["empty"]
    missing = DecontaminationConfig(
        benchmarks=[BenchmarkFile(path=tmp_path / "nope.jsonl", fields=["q"], name="x")]
    )
    with pytest.raises(ConfigError, match=r"nope\.jsonl"):
        load_index(missing, tmp_path / "s")


def test_corrupt_index_file_is_refused_and_a_cached_one_rebuilt(tmp_path: Path, shipped: NgramIndex) -> None:
    path = tmp_path / "x.npz"
    index = shipped.select(["aime-2025"])
    index.save(path)
    data = dict(np.load(path))
    data["hashes"] = data["hashes"].copy()
    data["hashes"][0, 0] ^= 1
    np.savez_compressed(path, **data)
    with pytest.raises(ConfigError, match="corrupt"):
        NgramIndex.load(path)


def test_other_ngram_sizes_build_from_the_source_packages(tmp_path: Path) -> None:
    config = DecontaminationConfig(ngram=8, builtins=["aime-2025"])
    index = load_index(config, tmp_path)
    question = builtin_items("aime-2025")[0].texts[0]
    assert index.n == 8
    hit = check_texts(["First words, then: " + " ".join(question.split()[:9])], index)[0]
    assert hit is not None and hit.item == "AIME2025-I/1"


def test_byte_path_normalises_as_the_unicode_rules_do() -> None:
    """ASCII pieces of text are normalised by numpy, pieces holding other characters by polars' Unicode
    regexes; the words must be the rules' words over whole texts, in row order, never across rows."""
    rows = [
        "Write has_close_elements(x) -- it's 3.5x FASTER!",
        None,
        "Café «naïve» ﬁle ½ 中文字 かな",
        "",
        "end",
        "start of the next row; ÉTÉ",
        "tab\tand\nnewline",
    ]
    words, lengths = normalized_words(rows)
    expected, expected_lengths = _unicode_words(pa.array([r or "" for r in rows], pa.string()))
    assert words.to_list() == expected.to_list() and lengths.tolist() == expected_lengths.tolist()
    assert words.to_list()[:9] == ["write", "has", "close", "elements", "x", "it", "s", "3", "5x"]
    assert "cafe" in words.to_list() and "中" in words.to_list() and lengths.tolist()[3:5] == [0, 1]


def test_lookup_finds_every_item_a_shared_ngram_belongs_to(shipped: NgramIndex) -> None:
    """The bucketed lookup returns each (query, item) the sorted table holds, duplicates included."""
    rng = np.random.default_rng(3)
    present = shipped.hashes[rng.integers(0, len(shipped.hashes), 2000)]
    shared = shipped.hashes[np.flatnonzero(shipped.hashes[1:] == shipped.hashes[:-1])[:50]]
    queries = np.concatenate([rng.integers(0, 2**63, 20000, dtype=np.uint64), present, shared])
    query, item = shipped.lookup(queries)
    left = np.searchsorted(shipped.hashes, queries, "left")
    right = np.searchsorted(shipped.hashes, queries, "right")
    expected = {(q, int(shipped.owners[k])) for q in range(len(queries)) for k in range(left[q], right[q])}
    assert set(zip(query.tolist(), item.tolist(), strict=True)) == expected and len(query) == len(expected)
    assert len(shared) and sum(1 for q, _ in expected if q >= len(queries) - len(shared)) > len(shared)
