"""The sample record's Arrow types: one schema every stage reads and writes (DESIGN.md)."""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "ANNOTATION",
    "DECISION",
    "DEDUP",
    "DIFFICULTY",
    "EXECUTION",
    "JUDGE_VOTE",
    "KINDS",
    "MESSAGE",
    "MESSAGES",
    "PROVENANCE",
    "ROLES",
    "SAMPLE_SCHEMA",
    "SCORES",
    "VERDICTS",
]

KINDS = ("sft", "preference", "code")
ROLES = ("system", "user", "assistant")
# keep/drop end a row's fate at a stage; route/accept/reject belong to review.
VERDICTS = ("keep", "drop", "route", "accept", "reject", "wait", "edit")

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
MESSAGES = pa.list_(MESSAGE)

PROVENANCE = pa.struct(
    [
        ("method", pa.string()),
        ("template_id", pa.string()),
        ("template_hash", pa.string()),
        ("engine", pa.string()),
        ("model", pa.string()),
        ("sampling_params", pa.string()),  # canonical JSON: a struct would fix the keys per engine
        ("seed_task_id", pa.string()),
        ("parent_id", pa.string()),
        ("code_version", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("finish_reason", pa.string()),  # the engine's: "length" means max_tokens cut the response
    ]
)

DEDUP = pa.struct(
    [
        ("cluster_id", pa.int64()),
        ("representative_id", pa.string()),
        ("is_representative", pa.bool_()),
        ("jaccard", pa.float64()),
    ]
)
EXECUTION = pa.struct(
    [
        ("status", pa.string()),
        ("exit_code", pa.int32()),
        ("duration_ms", pa.float64()),
        ("stdout_tail", pa.string()),
        ("stderr_tail", pa.string()),
        ("assertions_passed", pa.int32()),  # graded execution: asserts of the tests that held
        ("assertions_total", pa.int32()),
    ]
)
DIFFICULTY = pa.struct([("method", pa.string()), ("value", pa.float64()), ("detail", pa.string())])
JUDGE_VOTE = pa.struct(
    [
        ("judge", pa.string()),
        ("model", pa.string()),
        ("score", pa.float64()),  # null when the reply did not parse
        ("verdict", pa.string()),
        ("rationale", pa.string()),
        ("raw", pa.string()),
        ("parsed", pa.bool_()),
        ("method", pa.string()),  # json | probability | embedding | execution | unparsed
        ("confidence", pa.float64()),  # 0-1: 1 - normalised entropy of a probability vote
    ]
)
SCORES = pa.struct(
    [
        ("dedup", DEDUP),
        ("execution", EXECUTION),
        ("difficulty", DIFFICULTY),
        ("judges", pa.list_(JUDGE_VOTE)),
        ("judge_mean", pa.float64()),
        ("judge_median", pa.float64()),
        ("judge_spread", pa.float64()),
        ("judge_confidence", pa.float64()),  # mean confidence of the counted LLM votes
    ]
)
DECISION = pa.struct(
    [
        ("stage", pa.string()),
        ("verdict", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)
ANNOTATION = pa.struct(
    [
        ("project_id", pa.int64()),
        ("task_id", pa.int64()),
        ("annotation_id", pa.int64()),
        ("annotator", pa.string()),
        ("verdict", pa.string()),
        ("rating", pa.int64()),
        ("edited_response", pa.string()),
        ("preference", pa.string()),
        ("lead_time_s", pa.float64()),
    ]
)

SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("batch", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("messages", MESSAGES, nullable=False),
        pa.field("chosen", MESSAGES),
        pa.field("rejected", MESSAGES),
        pa.field("tests", pa.string()),
        pa.field("entry_point", pa.string()),
        pa.field("language", pa.string()),
        pa.field("provenance", PROVENANCE),
        pa.field("scores", SCORES),
        pa.field("decisions", pa.list_(DECISION), nullable=False),
        pa.field("annotation", ANNOTATION),
    ],
    metadata={"ptfactory.schema": "sample/1"},
)
