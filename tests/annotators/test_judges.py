"""Judges: garbage replies kept and excluded, aggregation math, alpha, and the real models."""

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from ptfactory.annotators.judges import (
    LLMJudge,
    Panel,
    RelevanceJudge,
    Vote,
    aggregate,
    krippendorff_alpha,
    parse_vote,
)
from ptfactory.annotators.judges.vote_columns import VoteColumns
from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.storage.schema import from_records, sample_id


@pytest.mark.parametrize(
    ("raw", "score", "verdict", "failure"),
    [
        ('{"score": 8, "verdict": "accept", "rationale": "fine"}', 8.0, "accept", None),
        (
            'Sure! {"score": 3, "verdict": "reject", "rationale": "wrong"} hope that helps',
            3.0,
            "reject",
            None,
        ),
        ('{"score": 7}', 7.0, "accept", None),  # a missing verdict follows the score
        ("I think it is an 8 out of 10.", None, "unparsed", "no JSON object in the reply"),
        ('{"score": 11, "verdict": "accept"}', None, "unparsed", "score 11 is not a number from 1 to 10"),
        ('{"score": "high"}', None, "unparsed", "score 'high' is not a number from 1 to 10"),
        ('{"score": "8", "verdict": "accept"}', 8.0, "accept", None),  # a number in a string is a number
        (
            '{"score": 0} then {"score": 4, "verdict": "reject"}',
            4.0,
            "reject",
            None,
        ),  # a bad object is skipped
        ('{"score": true}', None, "unparsed", "score True is not a number from 1 to 10"),
        ("", None, "unparsed", "no JSON object in the reply"),
        ("[1, 2]", None, "unparsed", "no JSON object in the reply"),
    ],
)
def test_parse_vote(raw: str, score: float | None, verdict: str, failure: str | None) -> None:
    got = parse_vote(raw)
    assert (got[0], got[1], got[3]) == (score, verdict, failure)


@dataclass
class Garbage(Engine):
    replies: list[str] = field(default_factory=list)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        return [[Completion(self.replies[i % len(self.replies)], 50, 10)] for i in range(len(conversations))]


def _rows(n: int, kind: str = "sft") -> list[dict[str, object]]:
    rows = []
    for i in range(n):
        messages = [
            {"role": "user", "content": f"Question {i}?"},
            {"role": "assistant", "content": f"Answer {i}."},
        ]
        rows.append(
            {
                "sample_id": sample_id(kind, messages),
                "batch": "b",
                "kind": kind,
                "messages": messages,
                "decisions": [],
            }
        )
    return rows


def test_garbage_replies_are_kept_raw_and_left_out_of_the_aggregate() -> None:
    garbage = LLMJudge(
        "garbage", engine=Garbage(model_id="g", replies=["lol no", '{"score": 99}']), scoring="json"
    )
    replies = ['{"score": 6, "verdict": "accept"}', '{"score": 8, "verdict": "accept"}']
    steady = LLMJudge("steady", engine=Garbage(model_id="s", replies=replies), scoring="json")
    table, _ = Panel([garbage, steady]).judge_table(from_records(_rows(4)))
    for i, row in enumerate(table.to_pylist()):
        votes = {v["judge"]: v for v in row["scores"]["judges"]}
        assert votes["garbage"]["parsed"] is False and votes["garbage"]["score"] is None
        assert votes["garbage"]["raw"] in ("lol no", '{"score": 99}')
        assert row["scores"]["judge_mean"] == (6.0, 8.0)[i % 2]  # the garbage is not a 0
    assert garbage.stats.parse_failure_rate == 1.0 and steady.stats.parse_failure_rate == 0.0
    assert garbage.stats.prompt_tokens == 200


def test_aggregation_math() -> None:
    votes = [
        Vote("a", "m", 8.0, "accept"),
        Vote("b", "m", 4.0, "reject"),
        Vote("c", "m", 6.0, "accept"),
        Vote("d", "m", None, "unparsed", parsed=False),
        Vote("e", "m", None, "abstain"),
    ]
    columns = VoteColumns.of([[v] for v in votes])
    agg = aggregate(columns, [1.0] * 5, keys=["a", "b", "a", "d", "e"])
    assert (agg.mean[0], agg.median[0], agg.spread[0], agg.counted[0], agg.votes[0]) == (6.0, 6.0, 4.0, 3, 2)
    weighted = aggregate(columns, [1.0, 0.5, 0.0, 1.0, 1.0])  # c weighs nothing: out of the mean
    assert weighted.mean[0] == pytest.approx((8 + 0.5 * 4) / 1.5) and weighted.counted[0] == 2
    nothing = aggregate(VoteColumns.of([[Vote("d", "m", None, "unparsed", parsed=False)]]), [1.0])
    assert not nothing.present[0] and nothing.votes[0] == 0


def test_krippendorff_alpha() -> None:
    perfect = np.array([[1.0, 5, 9, 3], [1, 5, 9, 3]])
    assert krippendorff_alpha(perfect) == pytest.approx(1.0)
    noisy = np.array([[1.0, 5, 9, 3, 7], [9, 2, 1, 8, 3]])
    assert krippendorff_alpha(noisy) < 0  # systematic disagreement
    # the textbook example (Krippendorff 2011, interval data, 4 coders, with missing values)
    nan = np.nan
    data = np.array(
        [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
        ],
        dtype=float,
    )
    assert krippendorff_alpha(data) == pytest.approx(0.849, abs=0.01)


def test_krippendorff_alpha_matches_the_package_and_scales_to_continuous_scores() -> None:
    """The closed form gives the ``krippendorff`` package's value, with missing votes; and a batch
    of 100k rows of continuous scores (every value distinct) takes no V x V memory."""
    import krippendorff

    rng = np.random.default_rng(3)
    for _ in range(5):
        truth = rng.integers(1, 11, size=60).astype(float)
        data = np.vstack([np.clip(truth + rng.normal(0, s, 60).round(), 1, 10) for s in (0.5, 1.5, 3.0)])
        data[rng.random(data.shape) < 0.15] = np.nan
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
        assert krippendorff_alpha(data) == pytest.approx(expected, abs=1e-9)
    truth = rng.uniform(1, 10, 100_000)
    big = np.vstack([truth + rng.normal(0, 1, truth.size), truth + rng.normal(0, 1, truth.size)])
    alpha = krippendorff_alpha(big)
    assert alpha is not None and 0.8 < alpha < 0.9  # var(truth) 6.75 against noise 1 per judge


def test_relevance_judge_with_the_bundled_minilm() -> None:
    rows = [
        {
            "kind": "sft",
            "messages": [
                {"role": "user", "content": "What is the capital of France?"},
                {"role": "assistant", "content": "Paris is the capital of France."},
            ],
        },
        {
            "kind": "sft",
            "messages": [
                {"role": "user", "content": "What is the capital of France?"},
                {"role": "assistant", "content": "Bananas are rich in potassium."},
            ],
        },
    ]
    related, unrelated = RelevanceJudge("minilm").judge(rows)
    assert related.score is not None and unrelated.score is not None
    assert related.score > unrelated.score + 3
    assert related.verdict == "accept" and unrelated.verdict == "reject"


_BUILD_RELEVANCE_SCORER = """
import json, os
import sentence_transformers, torch  # their own import-time settings are not ours to judge
from ptfactory.annotators.judges import RelevanceJudge

before = dict(os.environ)
judge = RelevanceJudge("minilm")
judge._encoder()
vote, = judge.judge([{"kind": "sft", "messages": [
    {"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."}]}])
after = dict(os.environ)
changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
print(json.dumps({"changed": changed, "scored": vote.score is not None}))
"""


def test_building_the_relevance_scorer_leaves_the_environment_alone() -> None:
    """Offline by argument (``local_files_only``), not by setting HF_HUB_OFFLINE for the process:
    run where HF_HUB_OFFLINE is unset, so a library that sets it is caught."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    done = subprocess.run(
        [sys.executable, "-c", _BUILD_RELEVANCE_SCORER],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"changed": [], "scored": True}
