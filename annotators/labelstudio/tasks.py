"""Sample rows → Label Studio tasks (data + the judges' votes as predictions). Pure functions.

A review task shows the judges' votes (as text and as predictions, so the annotator starts from
the machines' opinion) and its label config pre-fills the corrected-response box with
``data.response``. An audit task (routing reason ``audit``) goes to its kind's audit queue with
``data.audit = true`` and nothing of the machines' opinion: no votes, no mean, no execution log, no
predictions, so the expert is not anchored.
"""

from __future__ import annotations

from typing import Any

from ptfactory.annotators.labelstudio.configs import REVIEW_QUEUES, audit_queue
from ptfactory.storage.schema import audited_verdict, prompt_of, response_of

__all__ = ["queue_of", "to_task"]

_TAIL = 2000


def _is_audit(row: dict[str, Any]) -> bool:
    return audited_verdict(row.get("decisions")) is not None


def queue_of(row: dict[str, Any]) -> str:
    queue = str(row["kind"]) if row["kind"] in REVIEW_QUEUES else "sft"
    if row.get("steps") and row["kind"] in ("agent", "sft"):
        queue = "agent"  # a trajectory (kind agent, or made an sft row) is reviewed step by step
    return audit_queue(queue) if _is_audit(row) else queue


def _judges_text(scores: dict[str, Any]) -> str:
    votes = scores.get("judges") or []
    if not votes:
        return "no judge scored this sample"
    lines = []
    for vote in votes:
        if vote.get("method") == "pairwise":
            score = f"prefers {vote['verdict']}" if vote["verdict"] in ("A", "B") else "abstains"
        else:
            score = "unparsed" if vote.get("score") is None else f"{vote['score']:g}/10"
        why = (vote.get("rationale") or vote.get("raw") or "").strip().replace("\n", " ")
        lines.append(
            f"{vote['judge']} ({vote.get('model') or '-'}): {score}" + (f" — {why[:300]}" if why else "")
        )
    mean, spread = scores.get("judge_mean"), scores.get("judge_spread")
    if mean is not None:
        lines.append(f"panel: mean {mean:.2f}, spread {(spread or 0):.2f}")
    return "\n".join(lines)


def _execution_text(scores: dict[str, Any]) -> str:
    run = scores.get("execution") or {}
    if not run:
        return "not executed"
    parts = [
        f"status: {run.get('status')}, exit code {run.get('exit_code')}, {run.get('duration_ms') or 0:.0f} ms"
    ]
    if run.get("stdout_tail"):
        parts.append("stdout:\n" + run["stdout_tail"][-_TAIL:])
    if run.get("stderr_tail"):
        parts.append("stderr:\n" + run["stderr_tail"][-_TAIL:])
    return "\n".join(parts)


def _predictions(queue: str, scores: dict[str, Any], accept_at: float) -> list[dict[str, Any]]:
    """One pre-annotation per judge that gave a score: its verdict (and, for SFT, a 1–5 rating).
    On an A/B task, the judge's comparison in both orders (annotators/judges/pairwise.py): a judge
    whose verdict flipped with the order abstained and pre-fills nothing."""
    out = []
    for vote in scores.get("judges") or []:
        score = vote.get("score")
        if score is None:
            continue
        if queue == "preference":
            if vote.get("verdict") not in ("A", "B"):
                continue
            result = [_choice("preference", "response_a", vote["verdict"])]
        else:
            to = "steps" if queue == "agent" else "response"
            result = [_choice("verdict", to, "accept" if score >= accept_at else "reject")]
            if queue == "sft":
                stars = max(1, min(5, round(score / 2)))
                result.append(
                    {
                        "from_name": "rating",
                        "to_name": "response",
                        "type": "rating",
                        "value": {"rating": stars},
                    }
                )
        out.append({"model_version": str(vote["judge"]), "score": float(score) / 10.0, "result": result})
    return out


NO_WRONG_STEP = "none"  # the first_error choice that says every step was right (results.py reads it)


def _call(step: dict[str, Any]) -> str:
    name = step.get("name") or step.get("kind") or "step"
    arguments = step.get("arguments") or ""
    return f"{name} {arguments}".strip()


def _steps(row: dict[str, Any]) -> tuple[list[dict[str, str]], list[dict[str, str]], str]:
    """A trajectory's steps as Paragraphs (one per step: the call, exit code and output tail), the
    first-wrong-step options (``alias``: the step's index, or ``none``) and the outcome line."""
    paragraphs, options = [], []
    for position, step in enumerate(row.get("steps") or []):
        index = step.get("index") if step.get("index") is not None else position
        call = _call(step)
        facts = [f"status {step.get('status') or step.get('kind') or '?'}"]
        if step.get("exit_code") is not None:
            facts.append(f"exit code {step['exit_code']}")
        if step.get("duration_ms") is not None:
            facts.append(f"{step['duration_ms']:.0f} ms")
        if step.get("error"):
            facts.append(f"error: {step['error']}")
        text = f"{call}\n{', '.join(facts)}"
        if step.get("output_tail"):
            text += "\n" + str(step["output_tail"])[-_TAIL:]
        paragraphs.append({"author": f"step {index + 1}", "text": text})
        options.append({"value": f"step {index + 1}: {call[:80]}", "alias": str(index)})
    options.append({"value": "no wrong step", "alias": NO_WRONG_STEP})
    outcome = row.get("outcome") or {}
    solved = outcome.get("solved")
    line = "solved" if solved else ("not solved" if solved is not None else "outcome unknown")
    if outcome.get("stop_reason"):
        line += f" ({outcome['stop_reason']})"
    line += f", {len(paragraphs)} steps"
    return paragraphs, options, line


def _choice(name: str, to: str, value: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": to, "type": "choices", "value": {"choices": [value]}}


def to_task(row: dict[str, Any], accept_at: float = 7.0) -> dict[str, Any]:
    """The task Label Studio imports for one row; ``data.sample_id`` ties it back."""
    audit = _is_audit(row)
    queue = queue_of(row).removesuffix("-audit")
    scores = row.get("scores") or {}
    data: dict[str, Any] = {
        "sample_id": row["sample_id"],
        "batch": row["batch"],
        "kind": row["kind"],
        "audit": audit,
        # the whole context before the answer; a trajectory's steps are shown apart, so its task only
        "instruction": prompt_of(row["messages"], context=queue != "agent"),
    }
    if not audit:
        data["judges"] = _judges_text(scores)
        data["judge_mean"] = scores.get("judge_mean")
    if queue == "preference":
        data["response_a"] = response_of(row.get("chosen"), final_turn=False)
        data["response_b"] = response_of(row.get("rejected"), final_turn=False)
    elif queue == "agent":
        data["steps"], data["step_options"], data["outcome"] = _steps(row)
    else:
        data["response"] = response_of(row["messages"], final_turn=False)
    if queue == "code":
        data["tests"] = row.get("tests") or ""
        if not audit:
            data["execution"] = _execution_text(scores)
    return {"data": data, "predictions": [] if audit else _predictions(queue, scores, accept_at)}
