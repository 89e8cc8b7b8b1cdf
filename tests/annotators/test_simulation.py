"""Judges of known accuracy and bias, simulated: does the panel earn its keep?

Items have a true quality 1-10; each judge reports it with its own bias and noise and some
items it is blind to (the panel mixes a careful judge, a lenient one, a harsh one and a noisy
one, as different model families are). Measured with the real aggregation and routing code:
1. the panel mean is closer to the truth than the best single judge (mean absolute error), and
   its accept/reject labels are wrong less often;
2. sending the 10% of rows the judges disagree on most to review catches more wrong labels than
   sending a random 10%.
"""

from dataclasses import dataclass, field

import numpy as np

from ptfactory.annotators.judges import Panel, Vote
from ptfactory.annotators.judges.base import Judge
from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.storage.schema import from_records, sample_id

N = 2000
THRESHOLD = 5.5  # truth: good if quality >= 5.5


@dataclass
class Simulated(Judge):
    truth: dict[str, float] = field(default_factory=dict)
    bias: float = 0.0
    noise: float = 1.0
    seed: int = 0

    @property
    def model(self) -> str:
        return f"simulated-{self.name}"

    def _judge(self, rows: list[dict[str, object]]) -> list[Vote]:
        rng = np.random.default_rng(self.seed)
        truth = np.array([self.truth[str(r["sample_id"])] for r in rows])
        blind = rng.random(len(rows)) < 0.1  # items that fool this judge badly
        scores = (
            truth + self.bias + rng.normal(0, self.noise, len(rows)) + blind * rng.normal(0, 4, len(rows))
        )
        scores = np.clip(np.round(scores), 1, 10)
        return [
            Vote(self.name, self.model, float(s), "accept" if s >= THRESHOLD else "reject") for s in scores
        ]


def test_panel_beats_the_best_single_judge_and_disagreement_finds_errors() -> None:
    rng = np.random.default_rng(0)
    truth = rng.uniform(1, 10, N)
    rows = []
    for i in range(N):
        messages = [{"role": "user", "content": f"item {i}"}, {"role": "assistant", "content": f"answer {i}"}]
        rows.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": "b",
                "kind": "sft",
                "messages": messages,
                "decisions": [],
            }
        )
    known = {r["sample_id"]: float(t) for r, t in zip(rows, truth, strict=True)}

    def judges() -> list[Simulated]:
        kinds = [("careful", 0.0, 1.2), ("lenient", +1.0, 1.2), ("harsh", -1.0, 1.2), ("noisy", 0.0, 2.0)]
        return [
            Simulated(name, truth=known, bias=bias, noise=noise, seed=i)
            for i, (name, bias, noise) in enumerate(kinds)
        ]

    good = truth >= THRESHOLD
    single = {j.name: np.array([v.score for v in j.judge(rows)]) for j in judges()}  # type: ignore[arg-type]
    single_mae = {name: float(np.mean(np.abs(s - truth))) for name, s in single.items()}
    single_errors = {name: float(np.mean((s >= THRESHOLD) != good)) for name, s in single.items()}

    table, report = Panel(list(judges())).judge_table(from_records(rows))
    alpha = report.alpha
    scores = table.column("scores").to_pylist()
    mean = np.array([s["judge_mean"] for s in scores])
    panel_mae = float(np.mean(np.abs(mean - truth)))
    panel_wrong = (mean >= THRESHOLD) != good
    best = min(single_mae, key=lambda name: single_mae[name])
    print(
        f"\nMAE: panel {panel_mae:.3f}, best single judge ({best}) {single_mae[best]:.3f}; label errors: panel "
        f"{panel_wrong.mean():.3f}, best single {min(single_errors.values()):.3f}; Krippendorff alpha {alpha:.3f}"
    )
    assert panel_mae < min(single_mae.values())
    assert panel_wrong.mean() < min(single_errors.values())
    assert alpha is not None and 0 < alpha < 1

    budget = N // 10
    routed, _ = route(table, RoutingConfig(accept_at=11, reject_at=0, review_budget=budget))  # all to review
    reviewed = np.array([r["decisions"][-1]["reason"] == "needs_review" for r in routed.to_pylist()])
    assert reviewed.sum() == budget
    caught = int(panel_wrong[reviewed].sum())
    random_catches = [int(panel_wrong[rng.choice(N, budget, replace=False)].sum()) for _ in range(200)]
    print(
        f"the {budget} most disputed rows hold {caught} of {int(panel_wrong.sum())} wrong labels; a random "
        f"{budget} hold {np.mean(random_catches):.1f} on average (max of 200 draws {max(random_catches)})"
    )
    assert caught > np.percentile(random_catches, 99)
