"""A simulated batch with the factory's own failure: two judges of different families both prefer
the generator's fluent style, and the generator is fluent when it is wrong (the demo's likelihood
judges ranked the model's wrong answers above right ones); two weaker judges track correctness with
independent noise. Their equal mean ranks wrong above right. A share of the rows carry a reference,
and the real answer verifier decides them: the style judges measure below chance on those generated
rows and get no weight, the correctness judges earn theirs, and on the rows no verifier covers the
panel's weighted mean ranks right above wrong and what it auto-accepts is mostly right, where the
equal mean would have accepted mostly wrong answers.

Nothing here is true by construction of the aggregate: the style judges are not told apart by name
or family, only by what the verifiers' labels say about them on this batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptfactory.annotators.judges import Judge, Panel, VerifierSet, Vote
from ptfactory.annotators.judges.weights import auc
from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.filters.verify import reference_record
from ptfactory.storage.schema import from_records, sample_id

N, VERIFIED = 400, 0.4


@dataclass
class Simulated(Judge):
    """score = 5.5 + style_weight * style + truth_weight * (right - 0.5) * 6 + noise, clipped to 1-10."""

    truth: dict[str, tuple[bool, float]] = field(default_factory=dict)  # sample_id -> (right, style)
    style_weight: float = 0.0
    truth_weight: float = 0.0
    noise: float = 1.0
    seed: int = 0

    @property
    def model(self) -> str:
        return f"simulated-{self.name}"

    @property
    def method(self) -> str:
        return "probability"

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        rng = np.random.default_rng(self.seed)
        out = []
        for row in rows:
            right, style = self.truth[str(row["sample_id"])]
            score = 5.5 + self.style_weight * style + self.truth_weight * (float(right) - 0.5) * 6
            score = float(np.clip(score + rng.normal(0, self.noise), 1, 10))
            out.append(
                Vote(
                    self.name,
                    self.model,
                    round(score, 2),
                    "accept" if score >= 6 else "reject",
                    method="probability",
                )
            )
        return out


def _batch(
    rng: np.random.Generator,
) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray, dict[str, tuple[bool, float]]]:
    rows, right, verified, truth = [], rng.random(N) < 0.5, rng.random(N) < VERIFIED, {}
    for i in range(N):
        style = float(rng.normal(1.0 if not right[i] else -0.2, 0.7))  # fluent when wrong
        answer = "18" if right[i] else str(19 + i % 7)
        messages = [{"role": "user", "content": f"Problem {i}: how many?"},
                    {"role": "assistant", "content": f"Working through problem {i}, the answer is {answer}."}]  # fmt: skip
        row = {
            "sample_id": sample_id("sft", messages),
            "batch": "b",
            "kind": "sft",
            "messages": messages,
            "reference": reference_record(answer="18", source="answer") if verified[i] else None,
            "provenance": {"method": "response", "model": "Gen-1B"},
            "decisions": [],
        }
        truth[row["sample_id"]] = (bool(right[i]), style)
        rows.append(row)
    return rows, right, verified, truth


def test_batch_weights_undo_a_shared_style_bias_the_equal_mean_falls_for() -> None:
    rng = np.random.default_rng(0)
    rows, right, verified, truth = _batch(rng)
    judges: list[Judge] = [
        Simulated("style-a", family="a", truth=truth, style_weight=2.0, noise=0.8, seed=1),
        Simulated("style-b", family="b", truth=truth, style_weight=1.8, noise=0.8, seed=2),
        Simulated("sense-c", family="c", truth=truth, truth_weight=0.3, noise=1.0, seed=3),
        Simulated("sense-d", family="d", truth=truth, truth_weight=0.3, noise=1.0, seed=4),
    ]
    judged, report = Panel(judges, VerifierSet([("answer", "answer")])).judge_table(from_records(rows))
    assert report.labelled[0] + report.labelled[1] == int(verified.sum())
    assert report.weights["style-a"].flagged and report.weights["style-b"].flagged
    assert report.weights["sense-c"].weight > 0.3 and report.weights["sense-d"].weight > 0.3

    # flagged on the verified rows, the style judges were not asked about the others
    assert report.flagged_out["style-a"] == report.flagged_out["style-b"] == int((~verified).sum())
    assert report.flagged_out["sense-c"] == 0

    scores = judged.column("scores").to_pylist()
    # the panel of old: every judge asked about every row, the equal mean of their votes
    votes = np.array([[v.score for v in judge.judge(rows)] for judge in judges], dtype=float).T
    equal, weighted = votes.mean(axis=1), np.array([s["judge_mean"] for s in scores])
    open_ = ~verified  # the rows no verifier covers: what the judges decide alone
    equal_auc = auc(equal[open_], right[open_])
    weighted_auc = auc(weighted[open_], right[open_])
    print(f"\nunverified rows: AUC of the equal mean {equal_auc:.2f}, of the batch-weighted mean {weighted_auc:.2f}; "
          f"weights {report.weights_line()}")  # fmt: skip
    assert equal_auc is not None and equal_auc < 0.5  # the panel of old: wrong above right
    assert weighted_auc is not None and weighted_auc > 0.85

    config = RoutingConfig(audit_rate=0.0, review_budget=N, accept_at=6.5, max_spread=4.0)
    routed, _ = route(judged, config)
    reason = np.array([r["decisions"][-1]["reason"] for r in routed.to_pylist()])
    accepted = reason == "auto_accept"
    assert not (accepted & verified & ~right).any()  # a verifier's fail is never accepted
    weighted_wrong = float((~right[accepted & open_]).mean())
    equal_wrong = float((~right[(equal >= config.accept_at) & open_]).mean())
    print(
        f"auto-accepted unverified rows that are wrong: {weighted_wrong:.2f} (equal mean would accept {equal_wrong:.2f})"
    )
    assert (accepted & open_).sum() >= 20 and weighted_wrong < 0.15 and equal_wrong > 0.4
