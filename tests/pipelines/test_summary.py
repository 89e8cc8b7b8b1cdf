"""The run summary's judging lines (pipelines/summary.py) from judged_samples' metadata as `ptf run`
receives it: each verifier's verdicts, each judge's batch weight with its source and AUC, and a
judge measured under the AUC floor flagged."""

from __future__ import annotations

from ptfactory.pipelines.summary import judge_weight_lines, stage_lines, verifier_lines


def test_verdicts_and_weights() -> None:
    judged = {
        "verifier_verdicts": {"answer": {"fail": 5, "pass": 4, "no_answer": 1}, "code": {}},
        "judge_weights": {
            "gemma3": {
                "weight": 0.0, "source": "batch", "auc": 0.31, "low": 0.1, "high": 0.52,
                "positives": 5, "negatives": 6, "flagged": True, "constant": False, "left_out": False,
            },
            "smollm2": {
                "weight": 0.4, "source": "persisted", "auc": None, "low": None, "high": None,
                "positives": 1, "negatives": 0, "flagged": False, "constant": False, "left_out": False,
            },
        },
    }  # fmt: skip
    assert verifier_lines(judged) == ["answer: pass 4, fail 5, no_answer 1"]
    gemma, smol = judge_weight_lines(judged)
    assert gemma.startswith("gemma3: weight 0 (batch, AUC 0.31 [0.10, 0.52] on 5+/6-)")
    assert "FLAGGED: AUC under 0.55" in gemma
    assert smol == "smollm2: weight 0.4 (persisted)"
    assert verifier_lines({}) == [] and judge_weight_lines({}) == []


def test_the_stage_table_holds_every_step_that_took_time() -> None:
    """The agent episodes and the judge probe took a third of a held-out run, and the table left them
    out while its total counted them."""
    lines = stage_lines(
        {"agent_trajectories": {"dagster/row_count": 9}, "judged_samples": {"dagster/row_count": 40}},
        {"agent_trajectories": 107.8, "judged_samples": 289.4, "judged_samples_panel_probe": 169.1},
    )
    assert [(x.asset, x.rows, x.seconds) for x in lines] == [
        ("agent_trajectories", 9, 107.8),
        ("judged_samples", 40, 289.4),
        ("judged_samples_panel_probe", None, 169.1),
    ]
