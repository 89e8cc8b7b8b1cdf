"""Labeling configs: one review queue (one Label Studio project) per sample kind, and one blind audit
queue per kind.

A review config shows the instruction, the response(s) (an agent trajectory: its steps), what
each verifier found (sft, code and agent queues) and the judges' opinions in plain text, and asks for a verdict (a trajectory: also its first wrong step); its corrected-response box starts with the response (``value="$response"``), so
an expert edits instead of retyping (submitted unchanged, it is no correction). An audit config
(queue ``<kind>-audit``) shows neither the judges nor the execution log and starts the box empty:
the expert judges the sample unanchored. Names of the controls are what
:mod:`ptfactory.annotators.labelstudio.results` reads.
"""

from __future__ import annotations

__all__ = ["AUDIT_QUEUES", "LABEL_CONFIGS", "QUEUES", "REVIEW_QUEUES", "audit_queue", "project_title"]

_HEADER = """
  <Header value="Instruction"/>
  <Text name="instruction" value="$instruction"/>
"""

_JUDGES = """
  <Header value="What the judges said"/>
  <Text name="judges" value="$judges"/>
"""

# beside the votes: what each verifier checked (the reference and the extracted answer, the failed
# assertions, the agent check's output); review queues only (an audit is blind)
_VERIFIERS = """
  <Header value="What the verifiers found (checks against the reference, the tests, the task's check)"/>
  <Text name="verifiers" value="$verifiers"/>
"""

_AUDIT = """
  <Header value="Blind audit: judge this sample on its own (the judges' opinion is hidden on purpose)"/>
"""

_VERDICT = """
  <Choices name="verdict" toName="response" choice="single" showInline="true" required="true">
    <Choice value="accept"/>
    <Choice value="reject"/>
  </Choices>
"""


def _corrected(what: str, rows: int, prefill: bool) -> str:
    value = ' value="$response"' if prefill else ""
    hint = f"Edit the {what} to correct it (optional)" if prefill else f"A corrected {what} (optional)"
    return (
        f'  <TextArea name="corrected" toName="response" editable="true" maxSubmissions="1" rows="{rows}"'
        f'{value}\n            placeholder="{hint}: replaces the original"/>\n'
    )


def _sft(audit: bool) -> str:
    return (
        f"<View>\n{_AUDIT if audit else ''}{_HEADER}"
        '  <Header value="Response"/>\n  <Text name="response" value="$response"/>\n'
        f"{'' if audit else _VERIFIERS + _JUDGES}{_VERDICT}"
        '  <Rating name="rating" toName="response" maxRating="5"/>\n'
        f"{_corrected('response', 6, prefill=not audit)}</View>\n"
    )


def _code(audit: bool) -> str:
    execution = '  <Header value="Execution log"/>\n  <Text name="execution" value="$execution"/>\n'
    return (
        f"<View>\n{_AUDIT if audit else ''}{_HEADER}"
        '  <Header value="Solution"/>\n  <Text name="response" value="$response"/>\n'
        '  <Header value="Tests"/>\n  <Text name="tests" value="$tests"/>\n'
        f"{'' if audit else _VERIFIERS + execution + _JUDGES}{_VERDICT}"
        f"{_corrected('solution', 12, prefill=not audit)}</View>\n"
    )


def _preference(audit: bool) -> str:
    return (
        f"<View>\n{_AUDIT if audit else ''}{_HEADER}"
        '  <Header value="Response A"/>\n  <Text name="response_a" value="$response_a"/>\n'
        '  <Header value="Response B"/>\n  <Text name="response_b" value="$response_b"/>\n'
        f"{'' if audit else _JUDGES}"
        '  <Choices name="preference" toName="response_a" choice="single" showInline="true" required="true">\n'
        '    <Choice value="A"/>\n    <Choice value="B"/>\n    <Choice value="tie"/>\n  </Choices>\n'
        '  <TextArea name="reason" toName="response_a" maxSubmissions="1" placeholder="Why (optional)"/>\n'
        "</View>\n"
    )


def _trajectory(audit: bool) -> str:
    """An agent trajectory: the task, then each step (the call, its exit code and output) as a
    paragraph; the expert marks the first wrong step (options from the task's own steps), rates
    the process and accepts or rejects the trajectory."""
    return (
        f"<View>\n{_AUDIT if audit else ''}{_HEADER}"
        '  <Header value="Steps (call, exit code, output)"/>\n'
        '  <Paragraphs name="steps" value="$steps" layout="dialogue" nameKey="author" textKey="text"/>\n'
        '  <Header value="Outcome"/>\n  <Text name="outcome" value="$outcome"/>\n'
        f"{'' if audit else _VERIFIERS + _JUDGES}"
        '  <Header value="The first wrong step"/>\n'
        '  <Choices name="first_error" toName="steps" choice="single" value="$step_options" required="true"/>\n'
        '  <Header value="The process (1: aimless or harmful, 5: what an expert would do)"/>\n'
        '  <Rating name="rating" toName="steps" maxRating="5"/>\n'
        '  <Choices name="verdict" toName="steps" choice="single" showInline="true" required="true">\n'
        '    <Choice value="accept"/>\n    <Choice value="reject"/>\n  </Choices>\n'
        "</View>\n"
    )


def audit_queue(queue: str) -> str:
    """The blind audit queue beside a review queue."""
    return f"{queue}-audit"


SFT, CODE, PREFERENCE = _sft(audit=False), _code(audit=False), _preference(audit=False)
TRAJECTORY = _trajectory(audit=False)
REVIEW_QUEUES = ("sft", "code", "preference", "agent")
AUDIT_QUEUES = tuple(audit_queue(queue) for queue in REVIEW_QUEUES)
QUEUES = REVIEW_QUEUES + AUDIT_QUEUES  # every project a pull reads
LABEL_CONFIGS = {
    "sft": SFT,
    "code": CODE,
    "preference": PREFERENCE,
    "sft-audit": _sft(audit=True),
    "code-audit": _code(audit=True),
    "preference-audit": _preference(audit=True),
    "agent": TRAJECTORY,
    "agent-audit": _trajectory(audit=True),
}


def project_title(prefix: str, queue: str) -> str:
    if queue not in LABEL_CONFIGS:
        raise ValueError(f"unknown review queue {queue!r}; known: {', '.join(QUEUES)}")
    return f"{prefix}: {queue}"
