"""Sample rows → Label Studio tasks (data + the judges' votes as predictions). Pure functions.

A review task shows each verifier's evidence (``data.verifiers``: the reference and the answer
extracted from the response, the failed assertions, the agent check's output) beside the judges'
votes (as text and as predictions, so the annotator starts from the machines' opinion), and its
label config pre-fills the corrected-response box with ``data.response``. No verdict is pre-selected
that a verifier contradicts: where a verifier failed the response (or gave part credit) no
prediction says ``accept``, where one passed it none says ``reject``, and the verifier's own verdict
is a prediction. An audit task (routing reason ``audit``) goes to its kind's audit queue with
``data.audit = true`` and nothing of the machines' opinion: no votes, no mean, no execution log, no
predictions, so the expert is not anchored.
"""

from __future__ import annotations

import json
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
            score = _score_text(vote)
        why = (vote.get("rationale") or vote.get("raw") or "").strip().replace("\n", " ")
        lines.append(
            f"{vote['judge']} ({vote.get('model') or '-'}): {score}" + (f" — {why[:300]}" if why else "")
        )
    mean, spread = scores.get("judge_mean"), scores.get("judge_spread")
    if mean is not None:
        lines.append(f"panel: mean {mean:.2f}, spread {(spread or 0):.2f}")
    return "\n".join(lines)


def _score_text(vote: dict[str, Any]) -> str:
    """A vote's score; without one, ``unparsed`` only for a reply that did not parse (an abstention,
    such as the execution judge on a row with no code run, says so)."""
    if vote.get("score") is not None:
        return f"{vote['score']:g}/10"
    return "unparsed" if vote.get("parsed") is False or vote.get("verdict") == "unparsed" else "abstains"


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


def _evidence(verdict: dict[str, Any]) -> dict[str, Any]:
    try:
        found = json.loads(verdict.get("evidence") or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _verifier_line(verdict: dict[str, Any]) -> str:
    """One verifier's verdict and the evidence a reviewer needs to check it."""
    ev = _evidence(verdict)
    head = f"{verdict['verifier']} ({verdict.get('kind')}): {str(verdict['verdict']).upper()} — {verdict.get('reason')}"
    facts = []
    if "expected" in ev or "extracted" in ev:
        facts.append(f"expected {ev.get('expected')!r}, the response's answer {ev.get('extracted')!r}")
        if ev.get("rule"):
            facts[-1] += f" (found by {ev['rule']})"
    if ev.get("assertions_total") is not None:
        facts.append(f"assertions held {ev.get('assertions_passed')}/{ev['assertions_total']}")
    if ev.get("status") and verdict.get("kind") in ("code", "agent"):
        facts.append(
            f"status {ev['status']}"
            + (f", exit code {ev['exit_code']}" if ev.get("exit_code") is not None else "")
        )
    failed = ev.get("failed_checks") or ev.get("failed") or []
    if failed:
        facts.append("failed: " + "; ".join(str(f) for f in failed[:10]))
    if verdict.get("kind") == "consistency" and ev.get("answers"):
        facts.append(f"the generator's {ev.get('samples')} samples marked the answers {ev['answers']}")
    if ev.get("slips"):  # the reference contradicts itself: nothing was checked against it
        facts.append(
            "the reference's own working does not hold: " + "; ".join(str(s) for s in ev["slips"][:5])
        )
    if ev.get("grader_note"):  # the reply speaks to its grader: the expert sees what it says
        facts.append(f"the reply addresses its grader: {str(ev['grader_note'])[:_TAIL]!r}")
    if ev.get("check"):
        facts.append(f"check `{ev['check']}`")
    if ev.get("output_tail"):
        facts.append("check output:\n" + str(ev["output_tail"])[-_TAIL:])
    if (
        verdict.get("partial") is not None
        and verdict.get("verdict") != "pass"
        and verdict.get("kind") not in ("consistency", "grader_note")
    ):
        facts.append(f"part credit {verdict['partial']:.2f} (never a pass)")
    return head + "".join(f"\n  {f}" for f in facts)


def _verifiers_text(row: dict[str, Any]) -> str:
    """Each verifier's verdict with its evidence, and the row's reference answer."""
    verdicts = (row.get("scores") or {}).get("verifiers") or []
    reference = row.get("reference") or {}
    lines = [f"reference answer: {reference['answer']}"] if reference.get("answer") else []
    lines += [
        _verifier_line(v)
        for v in verdicts
        if v.get("verdict") != "abstain" or v.get("reason") != "not_applicable"
    ]
    return "\n".join(lines) or "no verifier applies to this sample (no reference, tests or checks)"


def _contradicted(scores: dict[str, Any]) -> set[str]:
    """Verdicts a verifier contradicts: accept after a fail or part credit, reject after a pass."""
    said = {v.get("verdict") for v in scores.get("verifiers") or []}
    if said & {"fail", "partial"}:
        return {"accept"}
    return {"reject"} if "pass" in said else set()


def _verifier_predictions(queue: str, scores: dict[str, Any]) -> list[dict[str, Any]]:
    """The verifiers' decided verdicts as pre-annotations (a fail: reject; a pass: accept)."""
    to = "steps" if queue == "agent" else "response"
    out = []
    for v in scores.get("verifiers") or []:
        if v.get("verdict") in ("pass", "fail"):
            choice = "accept" if v["verdict"] == "pass" else "reject"
            out.append(
                {
                    "model_version": f"verifier:{v['verifier']}",
                    "score": 1.0,
                    "result": [_choice("verdict", to, choice)],
                }
            )
    return out


def _predictions(queue: str, scores: dict[str, Any], accept_at: float) -> list[dict[str, Any]]:
    """One pre-annotation per judge that gave a score: its verdict (and, for SFT, a 1–5 rating),
    unless a verifier contradicts that verdict; the verifiers' own verdicts first. On an A/B task,
    the judge's comparison in both orders (annotators/judges/pairwise.py): a judge whose verdict
    flipped with the order abstained and pre-fills nothing."""
    contradicted = _contradicted(scores) if queue != "preference" else set()
    out = _verifier_predictions(queue, scores) if queue != "preference" else []
    for vote in scores.get("judges") or []:
        score = vote.get("score")
        if score is None or vote.get("method") == "verifier":
            continue
        if queue != "preference" and ("accept" if score >= accept_at else "reject") in contradicted:
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
        if queue != "preference":
            data["verifiers"] = _verifiers_text(row)
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
