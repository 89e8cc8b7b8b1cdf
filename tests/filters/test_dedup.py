"""MinHash dedup: accuracy on a synthetic corpus with ground truth, and each mechanism."""

import numpy as np
import pytest
from datasketch.lsh import _optimal_param

from ptfactory.filters.dedup.core import DedupConfig, deduplicate
from ptfactory.filters.dedup.lsh import optimal_bands, union_find
from ptfactory.filters.dedup.minhash import normalized
from tests.filters.corpus import build, pair_scores


@pytest.fixture(scope="module")
def corpus():  # type: ignore[no-untyped-def]
    return build(families=200, unrelated=400, seed=0)


def test_accuracy_on_a_synthetic_near_duplicate_corpus(corpus) -> None:  # type: ignore[no-untyped-def]
    result = deduplicate(corpus.texts, DedupConfig(threshold=0.8))
    # The pairs dedup asserts: each dropped row and the row kept in its place.
    asserted = [(i, int(c)) for i, c in enumerate(result.cluster) if i != c]
    right = sum(1 for i, c in asserted if corpus.truth.get((min(i, c), max(i, c)), 0.0) >= 0.8)
    precision = right / len(asserted)
    scores = pair_scores(result.cluster.tolist(), corpus, threshold=0.8, recall_floor=0.85)
    f1 = 2 * precision * scores["recall"] / (precision + scores["recall"])
    print(
        f"asserted-pair precision {precision:.3f}, all-cluster-pair precision {scores['precision']:.3f}, "
        f"recall(J>=0.85) {scores['recall']:.3f}, F1 {f1:.3f}"
    )
    assert precision >= 0.95
    assert scores["recall"] >= 0.95
    assert f1 >= 0.95


def test_signature_only_verification_stays_accurate(corpus) -> None:  # type: ignore[no-untyped-def]
    """Past exact_verify_max_docs the signatures' estimate decides; it must still be good."""
    result = deduplicate(corpus.texts, DedupConfig(threshold=0.8, exact_verify_max_docs=0))
    asserted = [(i, int(c)) for i, c in enumerate(result.cluster) if i != c]
    right = sum(1 for i, c in asserted if corpus.truth.get((min(i, c), max(i, c)), 0.0) >= 0.75)
    assert right / len(asserted) >= 0.95
    assert pair_scores(result.cluster.tolist(), corpus)["recall"] >= 0.95


@pytest.mark.parametrize(("threshold", "num_perm"), [(0.8, 128), (0.5, 128), (0.9, 64)])
def test_band_search_matches_datasketch(threshold: float, num_perm: int) -> None:
    assert optimal_bands(threshold, num_perm, 0.5, 0.5) == _optimal_param(threshold, num_perm, 0.5, 0.5)
    assert optimal_bands(threshold, num_perm, 0.05, 0.95) == _optimal_param(threshold, num_perm, 0.05, 0.95)


def test_normalization() -> None:
    texts = normalized(["Ｈｅｌｌｏ,   WORLD!!", "hello world", "  tabs\tand\nnewlines  "]).to_list()
    assert texts == ["hello world", "hello world", "tabs and newlines"]


def test_exact_and_near_duplicates_and_reasons() -> None:
    base = (
        "the committee met on monday to discuss the budget for the new library and the park renovation "
        "plans after a long debate the members agreed to fund the library first and to review the park "
        "plans in spring when more information about costs and timelines would be available from the city "
        "engineers and planners"
    )
    texts = [
        base,
        base.upper() + "!!",
        # one word changed at the end: true Jaccard 45/47 (a change mid-text, 41/51 = 0.80, sat on the
        # threshold, so whether it counted depended on the hash's luck)
        base.replace("planners", "designers"),
        "an unrelated sentence about whales and krill",
        None,
    ]
    result = deduplicate(texts, DedupConfig(threshold=0.8))
    assert result.reason == ["representative", "exact_duplicate", "near_duplicate", "unique", "unique"]
    assert result.cluster.tolist() == [0, 0, 0, 3, 4]
    assert result.jaccard[1] == 1.0 and 0.8 <= result.jaccard[2] < 1.0


def test_keeper_is_deterministic_and_follows_priority() -> None:
    base = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    texts = [base + " alpha", base + " beta", base]
    by_order = deduplicate(texts, DedupConfig(threshold=0.7))
    assert by_order.representative.tolist() == [True, False, False]
    by_priority = deduplicate(texts, DedupConfig(threshold=0.7), priority=np.array([2, 1, 0]))
    assert by_priority.representative.tolist() == [False, False, True]
    assert by_priority.cluster.tolist() == [2, 2, 2]


def test_union_find_components() -> None:
    labels = union_find(7, np.array([[0, 3], [3, 5], [1, 2], [6, 5]]))
    assert labels.tolist() == [0, 1, 1, 0, 4, 0, 0]


def test_short_and_empty_texts() -> None:
    result = deduplicate(["hi", "hi", "hello there", "", ""], DedupConfig())
    assert result.reason[:3] == ["representative", "exact_duplicate", "unique"]
    assert result.reason[4] == "exact_duplicate"  # two empty texts are the same text


def test_streamed_file_with_bbit_signatures_stays_accurate(corpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A file past exact_verify_max_docs keeps 8-bit signatures and 32-bit band keys per row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ptfactory.filters.dedup.files import dedup_parquet

    source, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"text": corpus.texts}), source, row_group_size=700)  # several groups
    config = DedupConfig(threshold=0.8, exact_verify_max_docs=0)
    dedup_parquet(source, out, "text", config)
    cluster = pq.read_table(out).column("dedup_cluster").to_pylist()
    asserted = [(i, c) for i, c in enumerate(cluster) if i != c]
    right = sum(1 for i, c in asserted if corpus.truth.get((min(i, c), max(i, c)), 0.0) >= 0.75)
    assert right / len(asserted) >= 0.95
    assert pair_scores(cluster, corpus)["recall"] >= 0.95
    # the same clusters as the in-memory path with full 32-bit signatures, nearly everywhere
    full = deduplicate(corpus.texts, config).cluster.tolist()
    assert sum(a == b for a, b in zip(cluster, full, strict=True)) / len(full) >= 0.98
