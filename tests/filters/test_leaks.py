"""The publish-time leak check finds near duplicates across train and validation however the
split was made, and stays quiet on distinct rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ptfactory.filters.dedup import leaks as leaks_module
from ptfactory.filters.dedup.core import DedupConfig
from ptfactory.filters.dedup.leaks import audit_texts, split_leaks
from ptfactory.storage.schema import from_records, sample_id

CONFIG = DedupConfig(threshold=0.7, workers=1)
QUESTIONS = {
    "rivers": "Explain to a ten year old how rivers carve valleys through solid rock over thousands of years.",
    "volcanoes": "Why do some volcanoes explode violently while others let lava flow out slowly and quietly?",
    "glaciers": "Describe what happens to a glacier during a warm summer and what it leaves behind when it melts.",
    "deserts": "List three animals that survive in hot deserts and say how each one finds enough water to live.",
    "forests": "What is the difference between a rainforest and a pine forest in terms of soil, light and rain?",
    "oceans": "How deep is the deepest part of the ocean and which creatures have been seen living down there?",
    "caves": "Tell the story of how a limestone cave with stalactites forms from rainwater dripping for ages.",
    "islands": "Compare islands made by volcanoes with islands made by coral reefs growing in warm shallow seas.",
    "comets": "Where do comets come from, and why do their tails always point away from the sun as they travel?",
    "tides": "Explain why the sea rises and falls twice a day and what the moon has to do with the tides.",
}
TOPICS = list(QUESTIONS)[:8]


def _table(texts: list[str], batch: str) -> pa.Table:
    """``text`` may end in ``|tail``: a few words added to the end of the answer (a near copy)."""
    records = []
    for given in texts:
        text, _, tail = given.partition("|")
        messages = [
            {"role": "user", "content": text},
            # the answer restates the question (as small models do): long enough for 5-word shingles
            {
                "role": "assistant",
                "content": f"You asked: {text} Here is a careful answer, step by step.{tail}",
            },
        ]
        records.append(
            {"sample_id": sample_id("sft", messages), "batch": batch, "kind": "sft", "messages": messages}
        )
    return from_records(records)


def _question(topic: str, extra: str = "") -> str:
    return QUESTIONS[topic] + (f"|{extra}" if extra else "")


def test_near_duplicates_across_the_split_are_leaks_distinct_rows_are_not() -> None:
    train = _table([_question(t) for t in TOPICS], "b1")
    # from another batch: two near copies of train rows (a word added), and two new topics
    validation = _table(
        [
            _question("rivers", " Thanks"),
            _question("caves", " Please"),
            _question("comets"),
            _question("tides"),
        ],
        "b2",
    )
    count, leaks = split_leaks({"train": train, "validation": validation}, CONFIG)
    assert count == 2
    ids = dict(
        zip(validation.column("sample_id").to_pylist(), ["rivers", "caves", "comets", "tides"], strict=True)
    )
    assert sorted(ids[x.validation_id] for x in leaks) == ["caves", "rivers"]
    assert all(CONFIG.threshold <= x.jaccard < 1 for x in leaks)
    train_ids = set(train.column("sample_id").to_pylist())
    assert all(x.train_id in train_ids for x in leaks)


def test_exact_copies_leak_and_a_single_split_has_nothing_to_leak() -> None:
    train = _table([_question(t) for t in TOPICS], "b1")
    copy = _table([_question("oceans")], "b2")
    assert split_leaks({"train": train, "validation": copy}, CONFIG)[0] == 1
    assert split_leaks({"train": train}, CONFIG) == (0, [])
    # near copies on the same side are dedup's business, not a split leak
    assert (
        split_leaks(
            {"train": pa.concat_tables([train, copy]), "validation": _table([_question("comets")], "b3")},
            CONFIG,
        )[0]
        == 0
    )


def test_preference_pairs_on_one_prompt_differ_by_their_chosen_answer() -> None:
    prompt = [{"role": "user", "content": _question("rivers")}]
    rows = [
        {
            "messages": prompt,
            "chosen": [{"role": "assistant", "content": "Rivers carve valleys slowly over many years."}],
        },
        {
            "messages": prompt,
            "chosen": [{"role": "assistant", "content": "Rain gathers into streams that join together."}],
        },
    ]
    texts = audit_texts(pa.Table.from_pylist(rows)).to_pylist()
    assert texts[0] != texts[1] and texts[0].startswith(prompt[0]["content"])


def test_the_same_rows_reordered_are_not_hashed_again_other_rows_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """The asset's mend and the staged audit ask about the same rows (staging sorts them): the
    second answer is the first, without a second MinHash pass; a changed row or side is hashed."""
    calls = []
    real = leaks_module.compute_signatures
    monkeypatch.setattr(leaks_module, "compute_signatures", lambda *a, **k: calls.append(1) or real(*a, **k))
    train = _table([_question(t) for t in TOPICS], "b1")
    validation = _table([_question("rivers", " Thanks"), _question("comets")], "b2")
    first = split_leaks({"train": train, "validation": validation}, CONFIG)
    reordered = {"validation": validation.take([1, 0]), "train": train.take(list(range(7, -1, -1)))}
    assert split_leaks(reordered, CONFIG) == first and first[0] == 1 and len(calls) == 1
    # the leaking row moved to train: other sides, other key, hashed again, no leak left
    moved = {"train": pa.concat_tables([train, validation.slice(0, 1)]), "validation": validation.slice(1)}
    assert split_leaks(moved, CONFIG) == (0, []) and len(calls) == 2
