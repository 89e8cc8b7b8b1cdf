"""The sample record: one Arrow schema that every stage reads and writes.

A row of a training shard explains itself: where it came from (``provenance``),
what every stage measured (``scores``), why it was kept, dropped or routed
(``decisions``), and what a human said (``annotation``). See DESIGN.md, "The sample
record". Stages never drop rows from their output: a dropped row carries a
``decisions`` entry with verdict ``drop`` and a snake_case reason.

==========  ==============================================================
module      holds
==========  ==============================================================
``record``  the Arrow types (``SAMPLE_SCHEMA``, schema 3, and its structs), kinds, roles, verdicts
``ids``     ``sample_id``, the stable content hash
``checks``  ``from_records``, ``conform``, ``validate_table``
``trail``   the decisions trail and scores: ``add_decision``, ``dropped_mask``, ``set_score``
``text``    what a row says: ``row_texts``, ``prompt_of``, ``response_of``
``review``  where a row stands with review: ``awaiting_review``, ``is_waiting``, ``pending_review``
==========  ==============================================================
"""

from ptfactory.storage.schema.checks import conform, empty_table, from_records, validate_table
from ptfactory.storage.schema.ids import sample_id
from ptfactory.storage.schema.record import (
    AGENT_COLUMNS,
    ANNOTATION,
    DECISION,
    DEDUP,
    DIFFICULTY,
    EXECUTION,
    JUDGE_VOTE,
    KINDS,
    MESSAGE,
    MESSAGE_V1,
    MESSAGES,
    OUTCOME,
    PROVENANCE,
    REFERENCE,
    ROLES,
    SAMPLE_SCHEMA,
    SCHEMA_VERSION,
    SCORES,
    STEP,
    STEP_LABEL,
    TOOL_CALL,
    VERDICTS,
    VERIFIER_OUTCOMES,
    VERIFIER_VOTE,
)
from ptfactory.storage.schema.review import (
    AUDIT_REASON,
    audited_verdict,
    awaiting_review,
    is_waiting,
    pending_review,
)
from ptfactory.storage.schema.text import prompt_of, response_of, row_texts, turn_text
from ptfactory.storage.schema.trail import add_decision, checkable_mask, dropped_mask, live_rows, set_score

__all__ = [
    "AGENT_COLUMNS",
    "ANNOTATION",
    "AUDIT_REASON",
    "DECISION",
    "DEDUP",
    "DIFFICULTY",
    "EXECUTION",
    "JUDGE_VOTE",
    "KINDS",
    "MESSAGE",
    "MESSAGES",
    "MESSAGE_V1",
    "OUTCOME",
    "PROVENANCE",
    "REFERENCE",
    "ROLES",
    "SAMPLE_SCHEMA",
    "SCHEMA_VERSION",
    "SCORES",
    "STEP",
    "STEP_LABEL",
    "TOOL_CALL",
    "VERDICTS",
    "VERIFIER_OUTCOMES",
    "VERIFIER_VOTE",
    "add_decision",
    "audited_verdict",
    "awaiting_review",
    "checkable_mask",
    "conform",
    "dropped_mask",
    "empty_table",
    "from_records",
    "is_waiting",
    "live_rows",
    "pending_review",
    "prompt_of",
    "response_of",
    "row_texts",
    "sample_id",
    "set_score",
    "turn_text",
    "validate_table",
]
